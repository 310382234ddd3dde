"""A small Python client of redt's gRPC API (``redt.v1``, ``api/proto/redt/v1/redt.proto``).

The stubs are generated from the project's ``.proto`` file with ``grpc_tools.protoc`` the
first time this module is imported (into ``~/.cache/redt-python``, or ``REDT_STUBS_DIR``),
so the file stays the single source of the API.

    from redt_client import Cluster
    c = Cluster.from_run_dir("run")              # a `redt cluster up --grpc-port ...` cluster
    c.run("kv", [c.put(1, b"hello")])            # one transaction, retried on retryable aborts
    print(c.run("kv", [c.get(1)])[0].value)      # b'hello'

Retries follow the API's error model: a retryable ``ABORTED`` is run again after a backoff
with jitter, a bounded number of times; a transaction whose outcome is unknown (a lost
answer, a node that died, a deadline) is never run again before its outcome was asked and
found ``ABORTED`` (every transaction runs under a reservation, see ``Cluster.run``).
"""

import hashlib
import json
import os
import random
import subprocess
import sys
import time

import grpc
from grpc_status import rpc_status

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_ROOT = os.path.join(REPO, "api", "proto")
PROTO = os.path.join("redt", "v1", "redt.proto")


def _stubs():
    """Generates (once per version of the .proto file) and imports the Python stubs."""
    with open(os.path.join(PROTO_ROOT, PROTO), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    base = os.environ.get("REDT_STUBS_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "redt-python")
    out = os.path.join(base, digest)
    if not os.path.exists(os.path.join(out, "redt", "v1", "redt_pb2_grpc.py")):
        os.makedirs(out, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", "-I", PROTO_ROOT, "--python_out", out,
             "--grpc_python_out", out, PROTO],
            check=True,
        )
    if out not in sys.path:
        sys.path.insert(0, out)
    from redt.v1 import redt_pb2, redt_pb2_grpc  # noqa: E402 (generated above)
    return redt_pb2, redt_pb2_grpc


pb, pb_grpc = _stubs()

ERROR_DOMAIN = "redt.dev"


class Aborted(Exception):
    """The transaction certainly did not commit (``ABORTED``); ``cause`` says why."""

    def __init__(self, message, cause, retryable, txn):
        super().__init__(message)
        self.cause, self.retryable, self.txn = cause, retryable, txn
        self.attempts = []


class OutcomeUnknown(Exception):
    """The outcome of transaction ``txn`` could not be learned in time."""

    def __init__(self, message, txn):
        super().__init__(message)
        self.txn = txn


def error_info(err):
    """The ``google.rpc.ErrorInfo`` detail of a failed call: ``(reason, metadata)``."""
    from google.rpc import error_details_pb2

    status = rpc_status.from_call(err)
    if status is None:
        return None, {}
    for d in status.details:
        if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            d.Unpack(info)
            if info.domain == ERROR_DOMAIN:
                return info.reason, dict(info.metadata)
    return None, {}


class Cluster:
    """Connections to every node's gRPC endpoint; calls go to one node and fail over."""

    def __init__(self, endpoints, certs_dir, identity="redt-client", retries=8, deadline_s=10.0):
        """``endpoints``: ``[(node name, "ip:port")]``; ``certs_dir``: the cluster's
        certificate directory (``ca.pem``, ``<identity>.pem``, ``<identity>.key``)."""
        read = lambda name: open(os.path.join(certs_dir, name), "rb").read()
        creds = grpc.ssl_channel_credentials(
            root_certificates=read("ca.pem"),
            private_key=read(identity + ".key"),
            certificate_chain=read(identity + ".pem"),
        )
        self.nodes = []
        for name, addr in endpoints:
            # A node's certificate is valid for its name: the TLS server name.
            ch = grpc.secure_channel(addr, creds, options=[("grpc.ssl_target_name_override", name)])
            self.nodes.append((name, ch, pb_grpc.TransactionsStub(ch)))
        self.retries, self.deadline_s = retries, deadline_s
        self.down_until = {}

    @classmethod
    def from_run_dir(cls, run_dir, identity="redt-client", **kw):
        """The cluster ``redt cluster up --run-dir RUN_DIR --grpc-port PORT`` started."""
        with open(os.path.join(run_dir, "grpc-endpoints.json")) as f:
            endpoints = [(e["node"], e["addr"]) for e in json.load(f)]
        return cls(endpoints, os.path.join(run_dir, "certs"), identity=identity, **kw)

    # Operations.
    @staticmethod
    def get(key):
        return pb.Operation(get=pb.Get(key=key))

    @staticmethod
    def put(key, value):
        return pb.Operation(put=pb.Put(key=key, value=value))

    @staticmethod
    def add(key, delta):
        return pb.Operation(add=pb.Add(key=key, delta=delta))

    @staticmethod
    def append(key, item):
        return pb.Operation(append=pb.Append(key=key, item=item))

    @staticmethod
    def check(key, version):
        return pb.Operation(check=pb.Check(key=key, version=version))

    def _order(self, prefer):
        now = time.monotonic()
        order = list(range(len(self.nodes)))
        order = order[prefer % len(order):] + order[:prefer % len(order)]
        up = [i for i in order if self.down_until.get(i, 0) <= now]
        return up + [i for i in order if i not in up]

    def _mark_down(self, i):
        self.down_until[i] = time.monotonic() + 2.0

    def read(self, table, keys, prefer=0):
        """Reads ``keys`` of ``table`` without locks: ``VersionedValue``s (value, version,
        found), one per key; commit ``check(key, version)`` of each to make the decision on
        them serializable. Fails over to the next node when one does not answer; reads again
        after a backoff when a key is busy under a writer (``NOT_READY``)."""
        last = None
        for attempt in range(self.retries):
            if attempt:
                time.sleep(random.uniform(0, min(1.0, 0.01 * (2 ** attempt))))
            for i in self._order(prefer):
                try:
                    return list(
                        self.nodes[i][2].Read(pb.ReadRequest(table=table, keys=keys), timeout=self.deadline_s).values)
                except grpc.RpcError as err:
                    reason, _ = error_info(err)
                    if reason in ("MALFORMED", "OVER_LIMIT", "FORBIDDEN"):
                        raise
                    last = err
                    if reason == "NOT_READY":
                        break  # a key busy under a writer: read again after a backoff
                    self._mark_down(i)
        raise OutcomeUnknown("no node answered the read: %s" % (last.details() if last else "no node"), 0)

    def status(self, node=0, count_locks=False):
        return self.nodes[node][2].Status(pb.StatusRequest(count_locks=count_locks), timeout=self.deadline_s)

    def outcome(self, reservation, prefer, give_up_s=60.0):
        """Asks nodes (the reserving one first) until the outcome is final: the
        ``OutcomeResponse`` of a committed or aborted transaction."""
        end = time.monotonic() + give_up_s
        while time.monotonic() < end:
            for i in self._order(prefer):
                try:
                    o = self.nodes[i][2].Outcome(
                        pb.OutcomeRequest(reservation=reservation, wait_ms=2000), timeout=self.deadline_s)
                except grpc.RpcError:
                    self._mark_down(i)
                    continue
                if o.state in (pb.OutcomeResponse.COMMITTED, pb.OutcomeResponse.ABORTED):
                    return o
            time.sleep(0.2)
        raise OutcomeUnknown("no final outcome of transaction %d" % reservation.txn, reservation.txn)

    def run(self, table, operations, prefer=0):
        """Runs the operations as one transaction; returns its ``OperationResult``s.

        Every attempt runs under a reservation, so a lost answer is resolved by asking the
        transaction's outcome, never by running it again blindly. Raises ``Aborted`` for an
        abort that is not retryable or after ``retries`` attempts, ``OutcomeUnknown`` when no
        outcome could be learned."""
        req = pb.RunRequest(key_value=pb.KeyValue(table=table, operations=operations))
        return self.run_request(req, prefer).results

    def run_request(self, req, prefer=0):
        """``run`` for any ``RunRequest`` (a procedure too); returns the ``RunResponse``.
        An ``Aborted`` it raises lists what each attempt did (``attempts``)."""
        last = None
        tried = []
        for attempt in range(self.retries):
            for i in self._order(prefer + attempt):
                stub = self.nodes[i][2]
                try:
                    res = stub.Reserve(pb.ReserveRequest(), timeout=self.deadline_s)
                except grpc.RpcError:
                    self._mark_down(i)
                    continue
                req.reservation.CopyFrom(res)
                try:
                    return stub.Run(req, timeout=self.deadline_s)
                except grpc.RpcError as err:
                    reason, meta = error_info(err)
                    if err.code() == grpc.StatusCode.ABORTED:
                        tried.append("%s txn %d: aborted %s" % (self.nodes[i][0], res.txn, meta.get("cause")))
                        last = Aborted(err.details(), meta.get("cause"), meta.get("retryable") == "true", res.txn)
                        if not last.retryable:
                            last.attempts = tried
                            raise last
                        break
                    if reason in ("MALFORMED", "OVER_LIMIT", "FORBIDDEN", "NOT_RESERVED"):
                        raise
                    # Unknown outcome, a dead node, a deadline: ask before anything else.
                    self._mark_down(i)
                    o = self.outcome(res, i)
                    tried.append("%s txn %d: %s, then asked: %s (%s)" % (
                        self.nodes[i][0], res.txn, err.code(), pb.OutcomeResponse.State.Name(o.state), o.detail))
                    if o.state == pb.OutcomeResponse.COMMITTED:
                        # Committed; what it read was in the lost answer.
                        return pb.RunResponse(txn=o.txn)
                    last = Aborted("transaction %d aborted (its answer was lost)" % res.txn, "lost", True, res.txn)
                    break
            # Exponential backoff with full jitter, capped.
            time.sleep(random.uniform(0, min(1.0, 0.01 * (2 ** attempt))))
        if last is None:
            raise OutcomeUnknown("no node answered", 0)
        last.attempts = tried
        raise last
