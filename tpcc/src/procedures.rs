//! The five TPC-C transactions (clauses 2.4-2.8) as redt stored procedures, their
//! parameters on the wire and the builder the coordinator calls ([`build`]).
//!
//! A redt procedure declares its accesses before it runs, and each DC runs it on the
//! replicas it holds, so (dc-executor `procedure.rs`) a write may only depend on values of
//! its own partition and on the parameters. TPC-C fits this with Calvin's OLLP: the driver
//! learns every order-dependent key with a reconnaissance read first (`driver.rs`) and puts
//! it in the parameters, and the procedure re-reads what the keys depend on and aborts
//! with [`STALE`] if it changed (the driver retries). Values of another partition that a
//! write needs are immutable in TPC-C (S_DIST_xx for a remote order line, the last-name
//! index), so the reconnaissance passes them too and their own partition checks them.
//!
//! TPC-C's range queries are range reads through the ordered index (dc-executor
//! `procedure.rs` [`RangeRead`], `ordered.rs`): inside the transaction, on the replicas of
//! the range's partition, every key of the range read is share-locked with the gap below it,
//! and so is the gap past the last one (next-key locking), so no insert can put a phantom
//! into a range an undecided transaction read. The reconnaissance still plans the keys the
//! range's rows lead to (the write set and the point reads must be declared before the
//! procedure runs): the procedure checks the plan against the rows it read and aborts with
//! [`STALE`] when they differ. That is OLLP kept where the accesses depend on a range's rows:
//! Delivery (the order it delivers), Order-Status (the order it reads), Stock-Level (the
//! stock rows it reads), and Payment / Order-Status by last name (the customer).
//!
//! Per transaction (w = home warehouse):
//! - **New-Order**: o_id = D_NEXT_O_ID from the reconnaissance, checked. ORDERS, NEW_ORDER
//!   and ORDER_LINE rows are pre-allocated ahead of D_NEXT_O_ID by the driver, so no two
//!   executors ever create the same key concurrently. Items are read from the home
//!   warehouse's copy of ITEM. ITEM and STOCK accesses create a missing record (zeroed),
//!   so the 1% unused item id reads as `i_im_id = 0` inside the transaction, which then
//!   rolls back with [`INVALID_ITEM`] (clause 2.4.2.3); the only records ever created that
//!   way are the one unused id per warehouse. It also creates the order's ORDER_CUSTOMER
//!   row (customer, reversed o_id): an insert into the customer's range, refused while an
//!   undecided Order-Status holds that range's gap locks.
//! - **Payment**: by id, or by last name: a range read of the name's CUSTOMER_LAST rows
//!   (one per customer, in C_FIRST order) on the customer's partition, which checks that the
//!   reconnaissance picked the middle one (clause 2.5.2.2). HISTORY rows go to the home
//!   warehouse's partition under a per-terminal unique key.
//! - **Order-Status**: the customer's last order is the first row of a range read of its
//!   ORDER_CUSTOMER rows, limit 1 (keys hold the order id reversed, so the newest order sorts
//!   first and the tree's ascending scan reaches it first; the fresh records aborted
//!   New-Orders left above it hold no row, so the range read passes over them without
//!   counting them, locking their keys and gaps), checked against the planned order, whose
//!   ORDERS and ORDER_LINE rows it reads; by last name as Payment.
//! - **Delivery**: one database transaction per district (the spec lets the deferred
//!   Delivery be split so, clause 2.7.4), the 10 of a Delivery run concurrently. The oldest
//!   undelivered order is the district's first NEW_ORDER row (clause 2.7.4.2, the lowest
//!   NO_O_ID): a range read of NEW_ORDER from the district's first key to its last, limit 1,
//!   whose one row must be the planned order. Keys without a row before it (delivered
//!   orders whose keys stayed in the tree because a range reader held their gaps when they
//!   were deleted) are passed over but locked with their gaps, so no order can appear below
//!   the one read before the decision. Delivery then deletes that row: it writes zero to
//!   every cell of the NEW_ORDER record (its one cell, `no_present`, is 1 in every row), so
//!   the record holds no row and phase 2 takes its key out of the tree (dc-executor
//!   `ordered.rs`, "Deletes"). Two Deliveries of one district conflict on the planned row's
//!   lock; no DISTRICT cell is involved.
//! - **Stock-Level**: the reconnaissance reads D_NEXT_O_ID and the item ids of the last 20
//!   orders; the transaction range-reads those orders' ORDER_LINE rows (`(w, d, o, 0..=15)`
//!   for the 20 order ids below the planned D_NEXT_O_ID), checks that their distinct item
//!   ids are the planned ones, and reads those items' stock quantities. It does not lock
//!   D_NEXT_O_ID: Stock-Level only needs read-committed isolation (P0 and P1 only: clause
//!   3.4.1, requirement 3), which a committed D_NEXT_O_ID gives.

use crate::schema::{self as sc, table};
use redt_dc_executor::{Access, Procedure, RangeRead, ReadView, UserAbort, Write};
use redt_proto::wire::{ProcedureCall, ProcedureKind, TpccCall};
use redt_proto::{TableId, Topology};
use std::sync::Arc;

/// Abort text of a reconnaissance that no longer holds.
pub const STALE: &str = "tpcc: stale reconnaissance";
/// Abort text of New-Order's intended rollback (clause 2.4.2.3).
pub const INVALID_ITEM: &str = "tpcc: item number is not valid";

/// Transaction kinds of [`TpccCall::kind`].
pub mod kind {
    /// New-Order.
    pub const NEW_ORDER: u32 = 1;
    /// Payment.
    pub const PAYMENT: u32 = 2;
    /// Order-Status.
    pub const ORDER_STATUS: u32 = 3;
    /// Delivery of one district.
    pub const DELIVERY: u32 = 4;
    /// Stock-Level.
    pub const STOCK_LEVEL: u32 = 5;
}

/// Builds the procedure of a TPC-C call.
///
/// # Errors
/// An unknown kind, malformed parameters, or a topology without the TPC-C tables.
pub fn build(topo: &Topology, kind: u32, params: &[u8]) -> Result<Arc<dyn Procedure>, String> {
    if topo.table(table::ORDER_CUSTOMER).is_none() {
        return Err(format!("topology `{}` has no TPC-C tables (use configs/tpcc.yaml)", topo.name));
    }
    let mut r = Dec(params);
    let p: Arc<dyn Procedure> = match kind {
        kind::NEW_ORDER => Arc::new(NewOrder::new(NewOrderParams::decode(&mut r)?)),
        kind::PAYMENT => Arc::new(Payment::new(PaymentParams::decode(&mut r)?)),
        kind::ORDER_STATUS => Arc::new(OrderStatus::new(OrderStatusParams::decode(&mut r)?)),
        kind::DELIVERY => Arc::new(Delivery::new(DeliveryParams::decode(&mut r)?)),
        kind::STOCK_LEVEL => Arc::new(StockLevel::new(StockLevelParams::decode(&mut r)?)),
        k => return Err(format!("unknown TPC-C transaction kind {k}")),
    };
    r.done()?;
    Ok(p)
}

/// The parameters of a call of `kind` re-planned to run after a committed call of the same
/// coordinator that it conflicts with (`prev_kind`, `prev_params`), or `None` when its plan
/// stays as it is. A New-Order's order id comes from a reconnaissance read of D_NEXT_O_ID
/// that a New-Order of the same district committing meanwhile makes stale; once that one
/// has committed, D_NEXT_O_ID is its order id + 1 (it checked the value it incremented), so
/// that is the id to plan. The procedure still checks D_NEXT_O_ID (a wrong plan aborts with
/// [`STALE`] as before); nothing else in TPC-C is re-planned.
pub fn rebase(kind: u32, params: &[u8], prev_kind: u32, prev_params: &[u8]) -> Option<Vec<u8>> {
    if kind != kind::NEW_ORDER || prev_kind != kind::NEW_ORDER {
        return None;
    }
    let decode = |b: &[u8]| {
        let mut r = Dec(b);
        let p = NewOrderParams::decode(&mut r).ok()?;
        r.done().ok().map(|()| p)
    };
    let (mut p, prev) = (decode(params)?, decode(prev_params)?);
    let next = prev.o_id + 1;
    if (p.w, p.d) != (prev.w, prev.d) || p.o_id == next || next > MAX_O {
        return None;
    }
    p.o_id = next;
    Some(p.encode())
}

/// The wire call of `kind` with `params`.
pub fn call(kind: u32, params: Vec<u8>) -> ProcedureCall {
    ProcedureCall { kind: Some(ProcedureKind::Tpcc(TpccCall { kind, params })) }
}

// ---------------------------------------------------------------------------------------
// Parameter codec: LEB128 integers and length-prefixed bytes.
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn u(&mut self, mut x: u64) -> &mut Self {
        loop {
            let b = (x & 0x7f) as u8;
            x >>= 7;
            if x == 0 {
                self.0.push(b);
                return self;
            }
            self.0.push(b | 0x80);
        }
    }
    fn i(&mut self, x: i64) -> &mut Self {
        self.u(((x << 1) ^ (x >> 63)) as u64)
    }
    fn b(&mut self, v: &[u8]) -> &mut Self {
        self.u(v.len() as u64);
        self.0.extend_from_slice(v);
        self
    }
}

struct Dec<'a>(&'a [u8]);

impl Dec<'_> {
    fn u(&mut self) -> Result<u64, String> {
        let mut x = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.0.split_first().ok_or("truncated TPC-C parameters")?;
            self.0 = rest;
            x |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(x);
            }
        }
        Err("overlong integer in TPC-C parameters".into())
    }
    fn u32(&mut self, what: &str, lo: u64, hi: u64) -> Result<u32, String> {
        let v = self.u()?;
        if !(lo..=hi).contains(&v) {
            return Err(format!("TPC-C parameter {what} = {v} out of range {lo}..={hi}"));
        }
        Ok(v as u32)
    }
    fn i(&mut self) -> Result<i64, String> {
        let u = self.u()?;
        Ok((u >> 1) as i64 ^ -((u & 1) as i64))
    }
    fn b(&mut self) -> Result<Vec<u8>, String> {
        let n = self.u()? as usize;
        if n > self.0.len() {
            return Err("truncated TPC-C parameters".into());
        }
        let (v, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(v.to_vec())
    }
    fn done(&self) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(format!("{} trailing bytes after the TPC-C parameters", self.0.len()))
        }
    }
}

const MAX_W: u64 = (1 << 24) - 1;
const MAX_O: u64 = sc::MAX_O_ID;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn acc(table: TableId, key: u64, read: &[u16], write: &[u16], upsert: bool) -> Access {
    Access { table, key, read: sc::mask(read), write: sc::mask(write), upsert }
}

/// The access routing a range read of `table` from `from`: a key of the range's partition
/// (every key of a warehouse is in its partition), reading cell 0 of each row.
fn range_acc(table: TableId, from: u64) -> Access {
    Access { table, key: from, read: 1, write: 0, upsert: true }
}

/// Cell 0 of each row of the range read routed by access `a`, as i64, with the row's key.
fn rows0<'a>(v: &ReadView<'a>, a: usize) -> impl Iterator<Item = (u64, i64)> + 'a {
    v.rows(a).iter().map(|r| (r.key, r.cells.first().map_or(0, |c| sc::get(c))))
}

/// The customer a by-name selection picks among the CUSTOMER_LAST rows a range read of one
/// last name returned (in rank order, that is by C_FIRST): clause 2.5.2.2's middle one.
fn pick_from_rows(v: &ReadView<'_>, a: usize) -> Option<u32> {
    let ids: Vec<u32> = rows0(v, a).map(|(_, c)| c as u32).collect();
    sc::pick_by_name(&ids)
}

/// Rows a last-name range read reads at most (ranks 0..=126).
const NAME_LIMIT: u32 = sc::MAX_SAME_LAST as u32 + 1;

fn wr(access: usize, cell: u16, value: Vec<u8>) -> Write {
    Write { access, cell, value }
}

/// Cell `cell` of access `a` as i64, if local.
fn num(v: &ReadView<'_>, a: usize, cell: u16) -> Option<i64> {
    v.cell(a, cell as usize).map(sc::get)
}

fn stale(what: &str) -> UserAbort {
    UserAbort(format!("{STALE} ({what})"))
}

// ---------------------------------------------------------------------------------------
// New-Order (clause 2.4)
// ---------------------------------------------------------------------------------------

/// One order line of a New-Order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// OL_I_ID (an unused id makes the transaction roll back).
    pub i_id: u32,
    /// OL_SUPPLY_W_ID.
    pub supply_w: u32,
    /// OL_QUANTITY (1..10).
    pub qty: u32,
    /// S_DIST_xx of the supplying stock row when `supply_w != w` (from the
    /// reconnaissance; checked by the stock's partition), else empty.
    pub dist_info: Vec<u8>,
}

/// Parameters of New-Order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOrderParams {
    /// W_ID.
    pub w: u32,
    /// D_ID.
    pub d: u32,
    /// C_ID.
    pub c: u32,
    /// The new order's id: D_NEXT_O_ID as the reconnaissance read it.
    pub o_id: u64,
    /// O_ENTRY_D.
    pub entry_d: i64,
    /// The order lines (5..15, distinct items).
    pub lines: Vec<Line>,
}

impl NewOrderParams {
    /// Encodes the parameters.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.u(self.w as u64).u(self.d as u64).u(self.c as u64).u(self.o_id).i(self.entry_d).u(self.lines.len() as u64);
        for l in &self.lines {
            e.u(l.i_id as u64).u(l.supply_w as u64).u(l.qty as u64).b(&l.dist_info);
        }
        e.0
    }
    fn decode(r: &mut Dec<'_>) -> Result<Self, String> {
        let w = r.u32("w", 1, MAX_W)?;
        let d = r.u32("d", 1, sc::DISTRICTS as u64)?;
        let c = r.u32("c", 1, 4095)?;
        let o_id = r.u()?;
        if !(1..=MAX_O).contains(&o_id) {
            return Err(format!("o_id {o_id} out of range"));
        }
        let entry_d = r.i()?;
        let n = r.u32("ol_cnt", 1, sc::MAX_OL as u64)?;
        let mut lines = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let i_id = r.u32("i_id", 1, (1 << 24) - 1)?;
            if lines.iter().any(|l: &Line| l.i_id == i_id) {
                return Err(format!("item {i_id} ordered twice"));
            }
            lines.push(Line {
                i_id,
                supply_w: r.u32("supply_w", 1, MAX_W)?,
                qty: r.u32("qty", 1, 10)?,
                dist_info: r.b()?,
            });
        }
        Ok(NewOrderParams { w, d, c, o_id, entry_d, lines })
    }
}

/// New-Order. Accesses: 0 warehouse, 1 district, 2 customer, 3 order, 4 new-order, then
/// per line `l`: `5 + 3l` item, `6 + 3l` stock, `7 + 3l` order line; last, the order's
/// ORDER_CUSTOMER row (created: its key holds the customer, unknown before the call).
#[derive(Debug)]
pub struct NewOrder {
    p: NewOrderParams,
    accesses: Vec<Access>,
}

impl NewOrder {
    fn new(p: NewOrderParams) -> Self {
        let (w, d) = (p.w, p.d);
        let mut a = vec![
            acc(table::WAREHOUSE, sc::warehouse_key(w), &[sc::w::TAX], &[], false),
            acc(table::DISTRICT, sc::district_key(w, d), &[sc::d::TAX, sc::d::NEXT_O_ID], &[sc::d::NEXT_O_ID], false),
            acc(
                table::CUSTOMER,
                sc::customer_key(w, d, p.c),
                &[sc::c::DISCOUNT, sc::c::LAST, sc::c::CREDIT],
                &[],
                false,
            ),
            acc(table::ORDERS, sc::order_key(w, d, p.o_id), &[], &[0, 1, 2, 3, 4], false),
            acc(table::NEW_ORDER, sc::new_order_key(w, d, p.o_id), &[], &[sc::no::PRESENT], false),
        ];
        let dist = sc::s::DIST_01 + d as u16 - 1;
        for (k, l) in p.lines.iter().enumerate() {
            let stock_cells = [sc::s::QUANTITY, sc::s::YTD, sc::s::ORDER_CNT, sc::s::REMOTE_CNT];
            a.push(acc(table::ITEM, sc::item_key(w, l.i_id), &[0, 1, 2, 3], &[], true));
            let mut read = stock_cells.to_vec();
            read.extend([dist, sc::s::DATA]);
            a.push(acc(table::STOCK, sc::stock_key(l.supply_w, l.i_id), &read, &stock_cells, true));
            a.push(acc(
                table::ORDER_LINE,
                sc::order_line_key(w, d, p.o_id, k as u32 + 1),
                &[],
                &[0, 1, 2, 3, 4, 5],
                false,
            ));
        }
        a.push(acc(table::ORDER_CUSTOMER, sc::order_customer_key(w, d, p.c, p.o_id), &[], &[sc::oc::O_ID], true));
        NewOrder { p, accesses: a }
    }
}

impl Procedure for NewOrder {
    fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    fn run(&self, v: &ReadView<'_>) -> Result<Vec<Write>, UserAbort> {
        let p = &self.p;
        let mut out = Vec::new();
        if let Some(next) = num(v, 1, sc::d::NEXT_O_ID) {
            if next as u64 != p.o_id {
                return Err(stale("d_next_o_id"));
            }
            out.push(wr(1, sc::d::NEXT_O_ID, sc::num(next + 1)));
        }
        for k in 0..p.lines.len() {
            if num(v, 5 + 3 * k, sc::i::IM_ID) == Some(0) {
                return Err(UserAbort(INVALID_ITEM.into()));
            }
        }
        let all_local = p.lines.iter().all(|l| l.supply_w == p.w);
        let oc = self.accesses.len() - 1;
        if v.is_local(oc) {
            out.push(wr(oc, sc::oc::O_ID, sc::num(p.o_id as i64)));
        }
        if v.is_local(3) {
            out.push(wr(3, sc::o::C_ID, sc::num(p.c as i64)));
            out.push(wr(3, sc::o::ENTRY_D, sc::num(p.entry_d)));
            out.push(wr(3, sc::o::CARRIER_ID, sc::num(0)));
            out.push(wr(3, sc::o::OL_CNT, sc::num(p.lines.len() as i64)));
            out.push(wr(3, sc::o::ALL_LOCAL, sc::num(all_local as i64)));
        }
        if v.is_local(4) {
            out.push(wr(4, sc::no::PRESENT, sc::num(1)));
        }
        let dist = (sc::s::DIST_01 + p.d as u16 - 1) as usize;
        for (k, l) in p.lines.iter().enumerate() {
            let (ai, as_, aol) = (5 + 3 * k, 6 + 3 * k, 7 + 3 * k);
            let remote = l.supply_w != p.w;
            if v.is_local(as_) {
                let stock_dist = v.cell(as_, dist).unwrap_or(&[]);
                if remote && sc::trim(stock_dist) != sc::trim(&l.dist_info) {
                    return Err(stale("s_dist"));
                }
                let q = num(v, as_, sc::s::QUANTITY).unwrap_or(0);
                let qty = l.qty as i64;
                let nq = if q >= qty + 10 { q - qty } else { q - qty + 91 };
                out.push(wr(as_, sc::s::QUANTITY, sc::num(nq)));
                out.push(wr(as_, sc::s::YTD, sc::num(num(v, as_, sc::s::YTD).unwrap_or(0) + qty)));
                out.push(wr(as_, sc::s::ORDER_CNT, sc::num(num(v, as_, sc::s::ORDER_CNT).unwrap_or(0) + 1)));
                let rc = num(v, as_, sc::s::REMOTE_CNT).unwrap_or(0) + remote as i64;
                out.push(wr(as_, sc::s::REMOTE_CNT, sc::num(rc)));
            }
            if v.is_local(aol) {
                // The item copy and, for a home line, the stock row share the order line's
                // partition, so every DC holding it computes the same values.
                let price = num(v, ai, sc::i::PRICE).unwrap_or(0);
                let dist_info = if remote { l.dist_info.clone() } else { v.cell(as_, dist).unwrap_or(&[]).to_vec() };
                out.push(wr(aol, sc::ol::I_ID, sc::num(l.i_id as i64)));
                out.push(wr(aol, sc::ol::SUPPLY_W_ID, sc::num(l.supply_w as i64)));
                out.push(wr(aol, sc::ol::DELIVERY_D, sc::num(0)));
                out.push(wr(aol, sc::ol::QUANTITY, sc::num(l.qty as i64)));
                out.push(wr(aol, sc::ol::AMOUNT, sc::num(l.qty as i64 * price)));
                out.push(wr(aol, sc::ol::DIST_INFO, sc::text(&dist_info, 24)));
            }
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------
// Payment (clause 2.5)
// ---------------------------------------------------------------------------------------

/// Parameters of Payment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaymentParams {
    /// W_ID (home).
    pub w: u32,
    /// D_ID.
    pub d: u32,
    /// C_W_ID.
    pub c_w: u32,
    /// C_D_ID.
    pub c_d: u32,
    /// C_ID (picked by the reconnaissance when selecting by last name).
    pub c: u32,
    /// Last-name number when selecting by last name.
    pub by_name: Option<u32>,
    /// H_AMOUNT in cents.
    pub amount: i64,
    /// H_DATE.
    pub date: i64,
    /// The HISTORY row's slot and sequence number (see `schema.rs`).
    pub h_slot: u32,
    /// See `h_slot`.
    pub h_seq: u64,
}

impl PaymentParams {
    /// Encodes the parameters.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.u(self.w as u64).u(self.d as u64).u(self.c_w as u64).u(self.c_d as u64).u(self.c as u64);
        e.u(self.by_name.map_or(0, |n| n as u64 + 1)).i(self.amount).i(self.date).u(self.h_slot as u64).u(self.h_seq);
        e.0
    }
    fn decode(r: &mut Dec<'_>) -> Result<Self, String> {
        Ok(PaymentParams {
            w: r.u32("w", 1, MAX_W)?,
            d: r.u32("d", 1, sc::DISTRICTS as u64)?,
            c_w: r.u32("c_w", 1, MAX_W)?,
            c_d: r.u32("c_d", 1, sc::DISTRICTS as u64)?,
            c: r.u32("c", 1, 4095)?,
            by_name: match r.u32("by_name", 0, 1000)? {
                0 => None,
                n => Some(n - 1),
            },
            amount: r.i()?,
            date: r.i()?,
            h_slot: r.u32("h_slot", 1, 255)?,
            h_seq: r.u()?.min(MAX_O),
        })
    }
}

/// Payment. Accesses: 0 warehouse, 1 district, 2 customer, 3 history, [4 the range read of
/// the customer's last name in CUSTOMER_LAST].
#[derive(Debug)]
pub struct Payment {
    p: PaymentParams,
    accesses: Vec<Access>,
    ranges: Vec<RangeRead>,
}

impl Payment {
    fn new(p: PaymentParams) -> Self {
        use sc::c;
        let mut a = vec![
            acc(
                table::WAREHOUSE,
                sc::warehouse_key(p.w),
                &[sc::w::NAME, sc::w::ADDRESS, sc::w::YTD],
                &[sc::w::YTD],
                false,
            ),
            acc(
                table::DISTRICT,
                sc::district_key(p.w, p.d),
                &[sc::d::NAME, sc::d::ADDRESS, sc::d::YTD],
                &[sc::d::YTD],
                false,
            ),
            acc(
                table::CUSTOMER,
                sc::customer_key(p.c_w, p.c_d, p.c),
                &[
                    c::FIRST,
                    c::MIDDLE,
                    c::LAST,
                    c::ADDRESS,
                    c::PHONE,
                    c::SINCE,
                    c::CREDIT,
                    c::CREDIT_LIM,
                    c::DISCOUNT,
                    c::BALANCE,
                    c::YTD_PAYMENT,
                    c::PAYMENT_CNT,
                    c::DATA,
                ],
                &[c::BALANCE, c::YTD_PAYMENT, c::PAYMENT_CNT, c::DATA],
                false,
            ),
            acc(table::HISTORY, sc::history_key(p.w, p.h_slot, p.h_seq), &[], &[0, 1, 2, 3, 4, 5, 6], true),
        ];
        let mut ranges = Vec::new();
        if let Some(n) = p.by_name {
            let (from, to) = sc::customer_last_range(p.c_w, p.c_d, n);
            a.push(range_acc(table::CUSTOMER_LAST, from));
            ranges.push(RangeRead { access: 4, from, to, limit: NAME_LIMIT });
        }
        Payment { p, accesses: a, ranges }
    }
}

impl Procedure for Payment {
    fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    fn ranges(&self) -> &[RangeRead] {
        &self.ranges
    }

    fn run(&self, v: &ReadView<'_>) -> Result<Vec<Write>, UserAbort> {
        let p = &self.p;
        let mut out = Vec::new();
        // The customer's partition holds the range: it checks the reconnaissance's pick.
        if p.by_name.is_some() && v.is_local(4) && pick_from_rows(v, 4) != Some(p.c) {
            return Err(stale("customer by last name"));
        }
        if let Some(ytd) = num(v, 0, sc::w::YTD) {
            out.push(wr(0, sc::w::YTD, sc::num(ytd + p.amount)));
        }
        if let Some(ytd) = num(v, 1, sc::d::YTD) {
            out.push(wr(1, sc::d::YTD, sc::num(ytd + p.amount)));
        }
        if v.is_local(2) {
            use sc::c;
            out.push(wr(2, c::BALANCE, sc::num(num(v, 2, c::BALANCE).unwrap_or(0) - p.amount)));
            out.push(wr(2, c::YTD_PAYMENT, sc::num(num(v, 2, c::YTD_PAYMENT).unwrap_or(0) + p.amount)));
            out.push(wr(2, c::PAYMENT_CNT, sc::num(num(v, 2, c::PAYMENT_CNT).unwrap_or(0) + 1)));
            if v.cell(2, c::CREDIT as usize).map(sc::trim) == Some(b"BC") {
                let old = sc::trim(v.cell(2, c::DATA as usize).unwrap_or(&[]));
                let mut data =
                    format!("{} {} {} {} {} {:.2} ", p.c, p.c_d, p.c_w, p.d, p.w, p.amount as f64 / 100.0).into_bytes();
                data.extend_from_slice(old);
                data.truncate(500);
                out.push(wr(2, c::DATA, data));
            }
        }
        if v.is_local(3) {
            // Same partition as the warehouse and district rows.
            let mut data = sc::trim(v.cell(0, sc::w::NAME as usize).unwrap_or(&[])).to_vec();
            data.extend_from_slice(b"    ");
            data.extend_from_slice(sc::trim(v.cell(1, sc::d::NAME as usize).unwrap_or(&[])));
            out.push(wr(3, sc::h::C_ID, sc::num(p.c as i64)));
            out.push(wr(3, sc::h::C_D_ID, sc::num(p.c_d as i64)));
            out.push(wr(3, sc::h::C_W_ID, sc::num(p.c_w as i64)));
            out.push(wr(3, sc::h::D_ID, sc::num(p.d as i64)));
            out.push(wr(3, sc::h::DATE, sc::num(p.date)));
            out.push(wr(3, sc::h::AMOUNT, sc::num(p.amount)));
            out.push(wr(3, sc::h::DATA, sc::text(&data, 24)));
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------
// Order-Status (clause 2.6)
// ---------------------------------------------------------------------------------------

/// Parameters of Order-Status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderStatusParams {
    /// W_ID.
    pub w: u32,
    /// D_ID.
    pub d: u32,
    /// C_ID (picked by the reconnaissance when selecting by last name).
    pub c: u32,
    /// Last-name number when selecting by last name.
    pub by_name: Option<u32>,
    /// The customer's last order, as the reconnaissance read it.
    pub o_id: u64,
    /// Its O_OL_CNT, as the reconnaissance read it.
    pub ol_cnt: u32,
}

impl OrderStatusParams {
    /// Encodes the parameters.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.u(self.w as u64).u(self.d as u64).u(self.c as u64).u(self.by_name.map_or(0, |n| n as u64 + 1));
        e.u(self.o_id).u(self.ol_cnt as u64);
        e.0
    }
    fn decode(r: &mut Dec<'_>) -> Result<Self, String> {
        Ok(OrderStatusParams {
            w: r.u32("w", 1, MAX_W)?,
            d: r.u32("d", 1, sc::DISTRICTS as u64)?,
            c: r.u32("c", 1, 4095)?,
            by_name: match r.u32("by_name", 0, 1000)? {
                0 => None,
                n => Some(n - 1),
            },
            o_id: r.u()?.clamp(1, MAX_O),
            ol_cnt: r.u32("ol_cnt", 1, sc::MAX_OL as u64)?,
        })
    }
}

/// Order-Status. Accesses: 0 customer, 1 order, 2.. order lines, then the range read of the
/// customer's ORDER_CUSTOMER rows, [last: the range read of its last name in CUSTOMER_LAST].
#[derive(Debug)]
pub struct OrderStatus {
    p: OrderStatusParams,
    accesses: Vec<Access>,
    ranges: Vec<RangeRead>,
}

impl OrderStatus {
    fn new(p: OrderStatusParams) -> Self {
        use sc::c;
        let mut a = vec![
            acc(
                table::CUSTOMER,
                sc::customer_key(p.w, p.d, p.c),
                &[c::FIRST, c::MIDDLE, c::LAST, c::BALANCE],
                &[],
                false,
            ),
            acc(
                table::ORDERS,
                sc::order_key(p.w, p.d, p.o_id),
                &[sc::o::C_ID, sc::o::ENTRY_D, sc::o::CARRIER_ID, sc::o::OL_CNT],
                &[],
                false,
            ),
        ];
        for ol in 1..=p.ol_cnt {
            a.push(acc(
                table::ORDER_LINE,
                sc::order_line_key(p.w, p.d, p.o_id, ol),
                &[sc::ol::I_ID, sc::ol::SUPPLY_W_ID, sc::ol::QUANTITY, sc::ol::AMOUNT, sc::ol::DELIVERY_D],
                &[],
                false,
            ));
        }
        let (from, to) = sc::order_customer_range(p.w, p.d, p.c);
        // One row: the newest order (fresh records above it hold no row and do not count).
        let mut ranges = vec![RangeRead { access: a.len(), from, to, limit: 1 }];
        a.push(range_acc(table::ORDER_CUSTOMER, from));
        if let Some(n) = p.by_name {
            let (from, to) = sc::customer_last_range(p.w, p.d, n);
            ranges.push(RangeRead { access: a.len(), from, to, limit: NAME_LIMIT });
            a.push(range_acc(table::CUSTOMER_LAST, from));
        }
        OrderStatus { p, accesses: a, ranges }
    }
}

impl Procedure for OrderStatus {
    fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    fn ranges(&self) -> &[RangeRead] {
        &self.ranges
    }

    fn run(&self, v: &ReadView<'_>) -> Result<Vec<Write>, UserAbort> {
        let p = &self.p;
        if p.by_name.is_some() {
            let names = self.ranges[1].access;
            if v.is_local(names) && pick_from_rows(v, names) != Some(p.c) {
                return Err(stale("customer by last name"));
            }
        }
        // The customer's newest order is the first row of its ORDER_CUSTOMER range; the gap
        // locks keep a New-Order of this customer from inserting a newer one before the
        // decision.
        let orders = self.ranges[0].access;
        if v.is_local(orders) && v.rows(orders).first().map(|r| sc::order_of_customer_key(r.key)) != Some(p.o_id) {
            return Err(stale("customer's last order"));
        }
        if num(v, 1, sc::o::OL_CNT).is_some_and(|n| n != p.ol_cnt as i64)
            || num(v, 1, sc::o::C_ID).is_some_and(|c| c != p.c as i64)
        {
            return Err(stale("order"));
        }
        for k in 0..p.ol_cnt as usize {
            if num(v, 2 + k, sc::ol::I_ID) == Some(0) {
                return Err(stale("order line"));
            }
        }
        Ok(Vec::new())
    }
}

// ---------------------------------------------------------------------------------------
// Delivery (clause 2.7), one district per transaction
// ---------------------------------------------------------------------------------------

/// Parameters of the delivery of one district.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryParams {
    /// W_ID.
    pub w: u32,
    /// D_ID.
    pub d: u32,
    /// O_CARRIER_ID (1..10).
    pub carrier: u32,
    /// OL_DELIVERY_D.
    pub date: i64,
    /// The oldest undelivered order, as the reconnaissance read it.
    pub o_id: u64,
    /// Its O_C_ID, as the reconnaissance read it.
    pub c: u32,
    /// Its O_OL_CNT, as the reconnaissance read it.
    pub ol_cnt: u32,
}

impl DeliveryParams {
    /// Encodes the parameters.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.u(self.w as u64).u(self.d as u64).u(self.carrier as u64).i(self.date);
        e.u(self.o_id).u(self.c as u64).u(self.ol_cnt as u64);
        e.0
    }
    fn decode(r: &mut Dec<'_>) -> Result<Self, String> {
        Ok(DeliveryParams {
            w: r.u32("w", 1, MAX_W)?,
            d: r.u32("d", 1, sc::DISTRICTS as u64)?,
            carrier: r.u32("carrier", 1, 10)?,
            date: r.i()?,
            o_id: r.u()?.clamp(1, MAX_O),
            c: r.u32("c", 1, 4095)?,
            ol_cnt: r.u32("ol_cnt", 1, sc::MAX_OL as u64)?,
        })
    }
}

/// Delivery of one district. Accesses: 0 the range read of the district's NEW_ORDER rows
/// (limit 1: the oldest), 1 the planned new-order (deleted: every cell written zero), 2 order,
/// 3 customer, 4.. order lines.
#[derive(Debug)]
pub struct Delivery {
    p: DeliveryParams,
    accesses: Vec<Access>,
    ranges: [RangeRead; 1],
}

impl Delivery {
    fn new(p: DeliveryParams) -> Self {
        let (w, d) = (p.w, p.d);
        let (from, to) = sc::new_order_range(w, d);
        let mut a = vec![
            range_acc(table::NEW_ORDER, from),
            acc(table::NEW_ORDER, sc::new_order_key(w, d, p.o_id), &[sc::no::PRESENT], sc::no::CELLS, false),
            acc(table::ORDERS, sc::order_key(w, d, p.o_id), &[sc::o::C_ID, sc::o::OL_CNT], &[sc::o::CARRIER_ID], false),
            acc(
                table::CUSTOMER,
                sc::customer_key(w, d, p.c),
                &[sc::c::BALANCE, sc::c::DELIVERY_CNT],
                &[sc::c::BALANCE, sc::c::DELIVERY_CNT],
                false,
            ),
        ];
        for ol in 1..=p.ol_cnt {
            a.push(acc(
                table::ORDER_LINE,
                sc::order_line_key(w, d, p.o_id, ol),
                &[sc::ol::I_ID, sc::ol::AMOUNT],
                &[sc::ol::DELIVERY_D],
                false,
            ));
        }
        // One row: the district's oldest new order (see the module docs).
        Delivery { p, accesses: a, ranges: [RangeRead { access: 0, from, to, limit: 1 }] }
    }
}

impl Procedure for Delivery {
    fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    fn ranges(&self) -> &[RangeRead] {
        &self.ranges
    }

    fn run(&self, v: &ReadView<'_>) -> Result<Vec<Write>, UserAbort> {
        // Every access is in the home warehouse's partition: all or nothing is local.
        let p = &self.p;
        if !v.is_local(0) {
            return Ok(Vec::new());
        }
        // The district's first NEW_ORDER row must be the planned order.
        let head = v.rows(0).first().map(|r| r.key);
        if head != Some(sc::new_order_key(p.w, p.d, p.o_id)) || num(v, 1, sc::no::PRESENT) != Some(1) {
            return Err(stale("oldest new-order"));
        }
        if num(v, 2, sc::o::C_ID) != Some(p.c as i64) || num(v, 2, sc::o::OL_CNT) != Some(p.ol_cnt as i64) {
            return Err(stale("order"));
        }
        // Delete the NEW_ORDER row: zero in every cell.
        let mut out: Vec<Write> = sc::no::CELLS.iter().map(|&c| wr(1, c, Vec::new())).collect();
        out.push(wr(2, sc::o::CARRIER_ID, sc::num(p.carrier as i64)));
        let mut total = 0i64;
        for k in 0..p.ol_cnt as usize {
            if num(v, 4 + k, sc::ol::I_ID) == Some(0) {
                return Err(stale("order line"));
            }
            total += num(v, 4 + k, sc::ol::AMOUNT).unwrap_or(0);
            out.push(wr(4 + k, sc::ol::DELIVERY_D, sc::num(p.date)));
        }
        out.push(wr(3, sc::c::BALANCE, sc::num(num(v, 3, sc::c::BALANCE).unwrap_or(0) + total)));
        out.push(wr(3, sc::c::DELIVERY_CNT, sc::num(num(v, 3, sc::c::DELIVERY_CNT).unwrap_or(0) + 1)));
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------
// Stock-Level (clause 2.8)
// ---------------------------------------------------------------------------------------

/// Parameters of Stock-Level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StockLevelParams {
    /// W_ID.
    pub w: u32,
    /// D_ID.
    pub d: u32,
    /// Threshold (10..20).
    pub threshold: i64,
    /// D_NEXT_O_ID as the reconnaissance read it (at least 2: one order at least).
    pub next_o_id: u64,
    /// The distinct OL_I_IDs of the last 20 orders' lines, ascending, as the reconnaissance
    /// read them.
    pub items: Vec<u32>,
}

impl StockLevelParams {
    /// Encodes the parameters.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.u(self.w as u64).u(self.d as u64).i(self.threshold).u(self.next_o_id).u(self.items.len() as u64);
        for &i in &self.items {
            e.u(i as u64);
        }
        e.0
    }
    fn decode(r: &mut Dec<'_>) -> Result<Self, String> {
        let w = r.u32("w", 1, MAX_W)?;
        let d = r.u32("d", 1, sc::DISTRICTS as u64)?;
        let threshold = r.i()?;
        let next_o_id = r.u()?;
        if !(2..=MAX_O).contains(&next_o_id) {
            return Err(format!("next_o_id {next_o_id} out of range"));
        }
        let n = r.u32("items", 0, 20 * sc::MAX_OL as u64)?;
        let mut items = Vec::with_capacity(n as usize);
        for _ in 0..n {
            items.push(r.u32("i_id", 1, (1 << 24) - 1)?);
        }
        if items.windows(2).any(|p| p[0] >= p[1]) {
            return Err("Stock-Level items must be distinct and ascending".into());
        }
        Ok(StockLevelParams { w, d, threshold, next_o_id, items })
    }

    /// The order ids of the last 20 orders: `next_o_id - 20 .. next_o_id` (from 1).
    pub fn orders(&self) -> std::ops::Range<u64> {
        self.next_o_id.saturating_sub(20).max(1)..self.next_o_id
    }
}

/// Stock-Level. Accesses: 0 the range read of the last 20 orders' ORDER_LINE rows, then one
/// stock row per planned item.
#[derive(Debug)]
pub struct StockLevel {
    p: StockLevelParams,
    accesses: Vec<Access>,
    ranges: [RangeRead; 1],
}

impl StockLevel {
    fn new(p: StockLevelParams) -> Self {
        let orders = p.orders();
        let from = sc::order_line_key(p.w, p.d, orders.start, 0);
        let to = sc::order_line_key(p.w, p.d, orders.end - 1, sc::MAX_OL);
        // 16 keys per order (line numbers 0..=15; 0 is never used) bound the keys in range.
        let limit = ((orders.end - orders.start) * 16) as u32;
        let mut a = Vec::with_capacity(1 + p.items.len());
        a.push(range_acc(table::ORDER_LINE, from));
        for &i in &p.items {
            a.push(acc(table::STOCK, sc::stock_key(p.w, i), &[sc::s::QUANTITY], &[], false));
        }
        StockLevel { p, accesses: a, ranges: [RangeRead { access: 0, from, to, limit }] }
    }

    /// The result: distinct items of the last 20 orders with S_QUANTITY below the
    /// threshold (`None` when the view does not hold the home warehouse).
    pub fn low_stock(&self, v: &ReadView<'_>) -> Option<usize> {
        (0..self.p.items.len())
            .map(|k| num(v, 1 + k, sc::s::QUANTITY).map(|q| q < self.p.threshold))
            .try_fold(0, |n, low| low.map(|l| n + l as usize))
    }
}

impl Procedure for StockLevel {
    fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    fn ranges(&self) -> &[RangeRead] {
        &self.ranges
    }

    fn run(&self, v: &ReadView<'_>) -> Result<Vec<Write>, UserAbort> {
        if v.is_local(0) {
            // The stock rows read must be those of the items the range's lines name.
            let mut items: Vec<u32> = rows0(v, 0).map(|(_, i)| i as u32).filter(|&i| i > 0).collect();
            items.sort_unstable();
            items.dedup();
            if items != self.p.items {
                return Err(stale("order lines of the last 20 orders"));
            }
        }
        let _ = self.low_stock(v);
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_order_after_a_committed_one_of_its_district_takes_the_next_order_id() {
        let no = |d: u32, o_id: u64| NewOrderParams {
            w: 2,
            d,
            c: 7,
            o_id,
            entry_d: 5,
            lines: vec![Line { i_id: 3, supply_w: 2, qty: 1, dist_info: vec![] }],
        };
        let after = |p: &NewOrderParams, prev: &NewOrderParams| {
            rebase(kind::NEW_ORDER, &p.encode(), kind::NEW_ORDER, &prev.encode())
                .map(|b| NewOrderParams::decode(&mut Dec(&b)).expect("decodes"))
        };
        // Both read D_NEXT_O_ID = 40; the first committed order 40, so the next is 41.
        assert_eq!(after(&no(4, 40), &no(4, 40)), Some(no(4, 41)));
        // Planned after a reconnaissance that saw an older value: still the next one.
        assert_eq!(after(&no(4, 38), &no(4, 40)), Some(no(4, 41)));
        // Already right, another district, another warehouse: unchanged.
        assert_eq!(after(&no(4, 41), &no(4, 40)), None);
        assert_eq!(after(&no(5, 40), &no(4, 40)), None);
        assert_eq!(after(&NewOrderParams { w: 3, ..no(4, 40) }, &no(4, 40)), None);
        // Only New-Order after New-Order; malformed parameters change nothing.
        assert_eq!(rebase(kind::PAYMENT, &no(4, 40).encode(), kind::NEW_ORDER, &no(4, 40).encode()), None);
        assert_eq!(rebase(kind::NEW_ORDER, &no(4, 40).encode(), kind::NEW_ORDER, &[1, 2]), None);
    }

    #[test]
    fn params_round_trip() {
        let no = NewOrderParams {
            w: 3,
            d: 7,
            c: 2999,
            o_id: 3001,
            entry_d: 1_700_000_000_000,
            lines: vec![
                Line { i_id: 1, supply_w: 3, qty: 5, dist_info: vec![] },
                Line { i_id: 99_999, supply_w: 1, qty: 10, dist_info: b"abc".to_vec() },
            ],
        };
        let mut r = Dec(&no.encode());
        assert_eq!(NewOrderParams::decode(&mut r).unwrap(), no);
        r.done().unwrap();
        let pay = PaymentParams {
            w: 1,
            d: 2,
            c_w: 4,
            c_d: 9,
            c: 17,
            by_name: Some(0),
            amount: -5,
            date: 9,
            h_slot: 3,
            h_seq: 77,
        };
        let mut r = Dec(&pay.encode());
        assert_eq!(PaymentParams::decode(&mut r).unwrap(), pay);
        let sl = StockLevelParams { w: 2, d: 3, threshold: 15, next_o_id: 3001, items: vec![4, 9, 700] };
        let mut r = Dec(&sl.encode());
        assert_eq!(StockLevelParams::decode(&mut r).unwrap(), sl);
    }

    use redt_dc_executor::RangeRow;

    fn row(key: u64, cell0: i64) -> RangeRow {
        RangeRow { key, cells: vec![sc::num(cell0)] }
    }

    /// Runs `p` on a view where every access is local, reading `point` for the point
    /// accesses (every cell) and `rows` for the range reads, by access.
    fn run_with(
        p: &dyn Procedure,
        point: &[(usize, Vec<Vec<u8>>)],
        rows: &[(usize, Vec<RangeRow>)],
    ) -> Result<(), String> {
        writes_of(p, point, rows).map(|_| ())
    }

    /// As [`run_with`], returning the writes.
    fn writes_of(
        p: &dyn Procedure,
        point: &[(usize, Vec<Vec<u8>>)],
        rows: &[(usize, Vec<RangeRow>)],
    ) -> Result<Vec<Write>, String> {
        let n = p.accesses().len();
        let mut values: Vec<Option<Vec<Vec<u8>>>> = vec![Some(vec![sc::num(0); 16]); n];
        for (a, v) in point {
            values[*a] = Some(v.clone());
        }
        let mut r: Vec<Vec<RangeRow>> = vec![Vec::new(); n];
        for (a, v) in rows {
            r[*a] = v.clone();
        }
        p.run(&ReadView::with_rows(&values, &r)).map_err(|e| e.0)
    }

    /// Point reads by access: every cell's value.
    type Points = Vec<(usize, Vec<Vec<u8>>)>;

    /// A Delivery of order 2102 of district (1, 4) and what it reads: its NEW_ORDER row, the
    /// order (customer 17, 5 lines) and the lines.
    fn delivery() -> (Delivery, Points) {
        let p = Delivery::new(DeliveryParams { w: 1, d: 4, carrier: 3, date: 9, o_id: 2102, c: 17, ol_cnt: 5 });
        let present = vec![sc::num(1)];
        let order = vec![sc::num(17), sc::num(0), sc::num(0), sc::num(5), sc::num(1)];
        let mut point = vec![(1, present), (2, order)];
        point.extend((0..5).map(|k| (4 + k, vec![sc::num(7); 6])));
        (p, point)
    }

    #[test]
    fn delivery_checks_the_planned_order_against_the_range() {
        let (w, d) = (1, 4);
        let (p, point) = delivery();
        let r = &p.ranges()[0];
        assert_eq!((r.from, r.to, r.limit), (sc::new_order_key(w, d, 0), sc::new_order_key(w, d, MAX_O), 1));
        assert!(r.from <= sc::new_order_key(w, d, 1), "the range starts at the district's first key");
        let no = |o| row(sc::new_order_key(w, d, o), 1);
        assert_eq!(run_with(&p, &point, &[(0, vec![no(2102)])]), Ok(()));
        // An older order is undelivered: the plan skipped the oldest new order.
        let e = run_with(&p, &point, &[(0, vec![no(2101)])]).unwrap_err();
        assert!(e.contains(STALE), "{e}");
        // The planned order was delivered meanwhile (the next one is the first row now).
        assert!(run_with(&p, &point, &[(0, vec![no(2103)])]).unwrap_err().contains(STALE));
        // No undelivered order at all.
        assert!(run_with(&p, &point, &[(0, vec![])]).unwrap_err().contains(STALE));
    }

    #[test]
    fn delivery_deletes_the_new_order_row_by_clearing_every_cell() {
        let (w, d) = (1, 4);
        let (p, point) = delivery();
        let no = &p.accesses()[1];
        assert_eq!((no.table, no.key), (table::NEW_ORDER, sc::new_order_key(w, d, 2102)));
        assert_eq!(no.write, sc::mask(sc::no::CELLS), "the access declares every cell written");
        let writes = writes_of(&p, &point, &[(0, vec![row(sc::new_order_key(w, d, 2102), 1)])]).unwrap();
        let mut cleared: Vec<u16> = writes.iter().filter(|x| x.access == 1).map(|x| x.cell).collect();
        cleared.sort_unstable();
        assert_eq!(cleared, sc::no::CELLS, "every NEW_ORDER cell is written");
        for x in writes.iter().filter(|x| x.access == 1) {
            assert!(x.value.iter().all(|&b| b == 0), "cell {} written {:?}, not zero", x.cell, x.value);
        }
        // The rest of the delivery: the carrier, the lines' date, the customer.
        assert!(writes.iter().any(|x| x.access == 2 && x.cell == sc::o::CARRIER_ID && x.value == sc::num(3)));
        assert_eq!(writes.iter().filter(|x| x.cell == sc::ol::DELIVERY_D && x.access >= 4).count(), 5);
    }

    #[test]
    fn order_status_takes_the_first_row_of_the_customers_orders_as_the_last_order() {
        let (w, d, c) = (2, 1, 40);
        let p = OrderStatus::new(OrderStatusParams { w, d, c, by_name: None, o_id: 3010, ol_cnt: 5 });
        let r = &p.ranges()[0];
        assert!(r.from < sc::order_customer_key(w, d, c, 3010) && sc::order_customer_key(w, d, c, 3010) < r.to);
        assert_eq!(r.limit, 1, "one row: the newest order");
        assert!(
            sc::order_customer_key(w, d, c, 3011) < sc::order_customer_key(w, d, c, 3010),
            "newer orders sort first"
        );
        let order = vec![sc::num(c as i64), sc::num(0), sc::num(0), sc::num(5), sc::num(1)];
        let lines: Vec<(usize, Vec<Vec<u8>>)> = (0..5).map(|k| (2 + k, vec![sc::num(7); 6])).collect();
        let mut point = vec![(1, order)];
        point.extend(lines);
        let a = r.access;
        let rows = vec![row(sc::order_customer_key(w, d, c, 3010), 3010)];
        assert_eq!(run_with(&p, &point, &[(a, rows)]), Ok(()));
        // A newer order of the customer committed after the reconnaissance.
        let rows = vec![row(sc::order_customer_key(w, d, c, 3044), 3044)];
        assert!(run_with(&p, &point, &[(a, rows)]).unwrap_err().contains(STALE));
    }

    #[test]
    fn by_name_selections_check_the_middle_customer_of_the_range() {
        let (w, d, name) = (1, 2, 77);
        let pay = |c| {
            Payment::new(PaymentParams {
                w,
                d,
                c_w: w,
                c_d: d,
                c,
                by_name: Some(name),
                amount: 100,
                date: 1,
                h_slot: 1,
                h_seq: 0,
            })
        };
        // Ranks 0..3 by C_FIRST: customers 30, 9, 211; the middle (ceil(3/2) = 2nd) is 9.
        let rows: Vec<RangeRow> = [30, 9, 211]
            .iter()
            .enumerate()
            .map(|(k, &c)| row(sc::customer_last_key(w, d, name, k as u32), c))
            .collect();
        assert_eq!(run_with(&pay(9), &[], &[(4, rows.clone())]), Ok(()));
        assert!(run_with(&pay(30), &[], &[(4, rows.clone())]).unwrap_err().contains(STALE));
        let os = OrderStatus::new(OrderStatusParams { w, d, c: 30, by_name: Some(name), o_id: 5, ol_cnt: 1 });
        let names = os.ranges()[1].access;
        let orders = os.ranges()[0].access;
        let order = vec![sc::num(30), sc::num(0), sc::num(0), sc::num(1), sc::num(1)];
        let last = vec![row(sc::order_customer_key(w, d, 30, 5), 5)];
        let e = run_with(&os, &[(1, order), (2, vec![sc::num(3); 6])], &[(names, rows), (orders, last)]).unwrap_err();
        assert!(e.contains("last name"), "{e}");
    }

    #[test]
    fn stock_level_checks_the_items_of_the_ranges_lines() {
        let (w, d) = (1, 5);
        let p = StockLevel::new(StockLevelParams { w, d, threshold: 15, next_o_id: 3001, items: vec![3, 8] });
        let r = &p.ranges()[0];
        assert_eq!((r.from, r.to), (sc::order_line_key(w, d, 2981, 0), sc::order_line_key(w, d, 3000, 15)));
        assert_eq!(r.limit, 320);
        let lines = vec![
            row(sc::order_line_key(w, d, 2990, 1), 8),
            row(sc::order_line_key(w, d, 2990, 2), 3),
            row(sc::order_line_key(w, d, 3000, 1), 8),
        ];
        assert_eq!(run_with(&p, &[], &[(0, lines.clone())]), Ok(()));
        let mut more = lines;
        more.push(row(sc::order_line_key(w, d, 3000, 2), 99));
        assert!(run_with(&p, &[], &[(0, more)]).unwrap_err().contains(STALE));
    }
}
