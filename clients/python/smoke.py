"""Checks a running cluster's gRPC endpoints with stock gRPC tooling, as any client would:

    python3 clients/python/smoke.py --run-dir run

- server reflection lists ``redt.v1.Transactions`` and ``grpc.health.v1.Health``, and its
  descriptors are enough to build a request (no generated code used for that);
- the health service answers ``SERVING`` for the API;
- a transaction runs (a put, then a get of it);
- errors carry the documented status and ``ErrorInfo`` reason: a client certificate asking
  for what needs the operator role is refused with ``PERMISSION_DENIED`` (``FORBIDDEN``), an
  unknown table with ``INVALID_ARGUMENT`` (``MALFORMED``).

Prints what it checked; exits 1 on the first check that fails.
"""

import argparse
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf import message_factory

from redt_client import Cluster, error_info, pb


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", required=True)
    a = ap.parse_args()

    client = Cluster.from_run_dir(a.run_dir)
    name, channel, stub = client.nodes[0]

    # Reflection, with nothing but the channel.
    db = ProtoReflectionDescriptorDatabase(channel)
    services = set(db.get_services())
    check("redt.v1.Transactions" in services, "reflection lists redt.v1.Transactions: %s" % sorted(services))
    check("grpc.health.v1.Health" in services, "reflection lists grpc.health.v1.Health")
    pool = DescriptorPool(db)
    run = pool.FindServiceByName("redt.v1.Transactions").FindMethodByName("Run")
    check(run.input_type.full_name == "redt.v1.RunRequest", "reflection describes Run's request type")
    # A request built from the reflected descriptors alone, sent as raw bytes.
    RunRequest = message_factory.GetMessageClass(run.input_type)
    req = RunRequest()
    req.key_value.table = "kv"
    op = req.key_value.operations.add()
    op.put.key = 42
    op.put.value = b"from reflection"
    raw = channel.unary_unary("/redt.v1.Transactions/Run")
    for attempt in range(5):
        try:
            raw(req.SerializeToString(), timeout=10)
            break
        except grpc.RpcError as err:
            # A cluster just started may time out its first transactions while the nodes
            # connect to each other: a retryable abort.
            reason, meta = error_info(err)
            check(err.code() == grpc.StatusCode.ABORTED and meta.get("retryable") == "true",
                  "attempt %d aborted, retryable: %s (%s)" % (attempt, meta.get("cause"), err.details()))
    else:
        check(False, "a transaction built from reflected descriptors committed within 5 attempts")
    check(True, "a transaction built from reflected descriptors committed")

    health = health_pb2_grpc.HealthStub(channel)
    h = health.Check(health_pb2.HealthCheckRequest(service="redt.v1.Transactions"), timeout=10)
    check(h.status == health_pb2.HealthCheckResponse.SERVING, "health: redt.v1.Transactions is SERVING")

    got = client.run("kv", [client.get(42)])
    check(got[0].value == b"from reflection", "the generated stubs read it back: %r" % got[0].value)

    try:
        stub.Status(pb.StatusRequest(count_locks=True), timeout=10)
        check(False, "a client certificate counting locks is refused")
    except grpc.RpcError as err:
        reason, meta = error_info(err)
        check(err.code() == grpc.StatusCode.PERMISSION_DENIED and reason == "FORBIDDEN",
              "a client certificate counting locks: %s %s (%s)" % (err.code(), reason, err.details()))
    operator = Cluster.from_run_dir(a.run_dir, identity="redt-operator")
    s = operator.status(count_locks=True)
    check(s.HasField("locks_held"), "an operator certificate counts locks: %d held on %s" % (s.locks_held, s.node))

    try:
        stub.Run(pb.RunRequest(key_value=pb.KeyValue(table="nope", operations=[client.get(1)])), timeout=10)
        check(False, "an unknown table is refused")
    except grpc.RpcError as err:
        reason, _ = error_info(err)
        check(err.code() == grpc.StatusCode.INVALID_ARGUMENT and reason == "MALFORMED",
              "an unknown table: %s %s (%s)" % (err.code(), reason, err.details()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
