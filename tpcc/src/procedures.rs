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
//! Per transaction (w = home warehouse):
//! - **New-Order**: o_id = D_NEXT_O_ID from the reconnaissance, checked. ORDERS, NEW_ORDER
//!   and ORDER_LINE rows are pre-allocated ahead of D_NEXT_O_ID by the driver, so no two
//!   executors ever create the same key concurrently. Items are read from the home
//!   warehouse's copy of ITEM. ITEM and STOCK accesses create a missing record (zeroed),
//!   so the 1% unused item id reads as `i_im_id = 0` inside the transaction, which then
//!   rolls back with [`INVALID_ITEM`] (clause 2.4.2.3); the only records ever created that
//!   way are the one unused id per warehouse.
//! - **Payment**: by id, or by last name through the index (the reconnaissance picks the
//!   customer; the transaction reads the index entry and checks the pick). HISTORY rows go
//!   to the home warehouse's partition under a per-terminal unique key.
//! - **Order-Status**: the customer's last order from its `c_last_o_id` cell, checked.
//! - **Delivery**: one database transaction per district (the spec lets the deferred
//!   Delivery be split so, clause 2.7.4), the 10 of a Delivery run concurrently; the oldest
//!   undelivered order is the district's `d_no_head` cell.
//! - **Stock-Level**: the reconnaissance reads D_NEXT_O_ID and the item ids of the last 20
//!   orders; the transaction reads those order lines (checking their item ids) and the
//!   stock quantities. It does not lock D_NEXT_O_ID: Stock-Level only needs read-committed
//!   isolation (P0 and P1 only: clause 3.4.1, requirement 3), which a committed D_NEXT_O_ID
//!   gives.

use crate::schema::{self as sc, table};
use redt_dc_executor::{Access, Procedure, ReadView, UserAbort, Write};
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
    if topo.table(table::CUSTOMER_LAST).is_none() {
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
const MAX_O: u64 = (1 << 32) - 1;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn acc(table: TableId, key: u64, read: &[u16], write: &[u16], upsert: bool) -> Access {
    Access { table, key, read: sc::mask(read), write: sc::mask(write), upsert }
}

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
/// per line `l`: `5 + 3l` item, `6 + 3l` stock, `7 + 3l` order line.
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
                &[sc::c::LAST_O_ID],
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
        if v.is_local(2) {
            out.push(wr(2, sc::c::LAST_O_ID, sc::num(p.o_id as i64)));
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

/// Payment. Accesses: 0 warehouse, 1 district, 2 customer, 3 history, [4 last-name index].
#[derive(Debug)]
pub struct Payment {
    p: PaymentParams,
    accesses: Vec<Access>,
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
        if let Some(n) = p.by_name {
            a.push(acc(table::CUSTOMER_LAST, sc::customer_last_key(p.c_w, p.c_d, n), &[sc::cl::IDS], &[], false));
        }
        Payment { p, accesses: a }
    }
}

impl Procedure for Payment {
    fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    fn run(&self, v: &ReadView<'_>) -> Result<Vec<Write>, UserAbort> {
        let p = &self.p;
        let mut out = Vec::new();
        if p.by_name.is_some() {
            if let Some(ids) = v.cell(4, sc::cl::IDS as usize) {
                if sc::pick_by_name(&sc::decode_ids(ids)) != Some(p.c) {
                    return Err(stale("customer by last name"));
                }
            }
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

/// Order-Status. Accesses: 0 customer, 1 order, 2.. order lines, [last: name index].
#[derive(Debug)]
pub struct OrderStatus {
    p: OrderStatusParams,
    accesses: Vec<Access>,
}

impl OrderStatus {
    fn new(p: OrderStatusParams) -> Self {
        use sc::c;
        let mut a = vec![
            acc(
                table::CUSTOMER,
                sc::customer_key(p.w, p.d, p.c),
                &[c::FIRST, c::MIDDLE, c::LAST, c::BALANCE, c::LAST_O_ID],
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
        if let Some(n) = p.by_name {
            a.push(acc(table::CUSTOMER_LAST, sc::customer_last_key(p.w, p.d, n), &[sc::cl::IDS], &[], false));
        }
        OrderStatus { p, accesses: a }
    }
}

impl Procedure for OrderStatus {
    fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    fn run(&self, v: &ReadView<'_>) -> Result<Vec<Write>, UserAbort> {
        let p = &self.p;
        if p.by_name.is_some() {
            if let Some(ids) = v.cell(self.accesses.len() - 1, sc::cl::IDS as usize) {
                if sc::pick_by_name(&sc::decode_ids(ids)) != Some(p.c) {
                    return Err(stale("customer by last name"));
                }
            }
        }
        if num(v, 0, sc::c::LAST_O_ID).is_some_and(|o| o as u64 != p.o_id) {
            return Err(stale("c_last_o_id"));
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

/// Delivery of one district. Accesses: 0 district, 1 new-order, 2 order, 3 customer,
/// 4.. order lines.
#[derive(Debug)]
pub struct Delivery {
    p: DeliveryParams,
    accesses: Vec<Access>,
}

impl Delivery {
    fn new(p: DeliveryParams) -> Self {
        let (w, d) = (p.w, p.d);
        let mut a = vec![
            acc(table::DISTRICT, sc::district_key(w, d), &[sc::d::NO_HEAD], &[sc::d::NO_HEAD], false),
            acc(table::NEW_ORDER, sc::new_order_key(w, d, p.o_id), &[sc::no::PRESENT], &[sc::no::PRESENT], false),
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
        Delivery { p, accesses: a }
    }
}

impl Procedure for Delivery {
    fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    fn run(&self, v: &ReadView<'_>) -> Result<Vec<Write>, UserAbort> {
        // Every access is in the home warehouse's partition: all or nothing is local.
        let p = &self.p;
        if !v.is_local(0) {
            return Ok(Vec::new());
        }
        if num(v, 0, sc::d::NO_HEAD) != Some(p.o_id as i64) || num(v, 1, sc::no::PRESENT) != Some(1) {
            return Err(stale("new-order queue head"));
        }
        if num(v, 2, sc::o::C_ID) != Some(p.c as i64) || num(v, 2, sc::o::OL_CNT) != Some(p.ol_cnt as i64) {
            return Err(stale("order"));
        }
        let mut out = vec![
            wr(0, sc::d::NO_HEAD, sc::num(p.o_id as i64 + 1)),
            wr(1, sc::no::PRESENT, sc::num(0)),
            wr(2, sc::o::CARRIER_ID, sc::num(p.carrier as i64)),
        ];
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
    /// The order lines of the last 20 orders, as (o_id, ol_number, OL_I_ID) from the
    /// reconnaissance.
    pub lines: Vec<(u64, u32, u32)>,
}

impl StockLevelParams {
    /// Encodes the parameters.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.u(self.w as u64).u(self.d as u64).i(self.threshold).u(self.lines.len() as u64);
        for &(o, ol, i) in &self.lines {
            e.u(o).u(ol as u64).u(i as u64);
        }
        e.0
    }
    fn decode(r: &mut Dec<'_>) -> Result<Self, String> {
        let w = r.u32("w", 1, MAX_W)?;
        let d = r.u32("d", 1, sc::DISTRICTS as u64)?;
        let threshold = r.i()?;
        let n = r.u32("lines", 0, 20 * sc::MAX_OL as u64)?;
        let mut lines = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let o = r.u()?.clamp(1, MAX_O);
            lines.push((o, r.u32("ol", 1, sc::MAX_OL as u64)?, r.u32("i_id", 1, (1 << 24) - 1)?));
        }
        Ok(StockLevelParams { w, d, threshold, lines })
    }
}

/// Stock-Level. Accesses: the order lines, then one stock row per distinct item.
#[derive(Debug)]
pub struct StockLevel {
    p: StockLevelParams,
    items: Vec<u32>,
    accesses: Vec<Access>,
}

impl StockLevel {
    fn new(p: StockLevelParams) -> Self {
        let mut a = Vec::with_capacity(p.lines.len() * 2);
        for &(o, ol, _) in &p.lines {
            a.push(acc(table::ORDER_LINE, sc::order_line_key(p.w, p.d, o, ol), &[sc::ol::I_ID], &[], false));
        }
        let mut items: Vec<u32> = p.lines.iter().map(|l| l.2).collect();
        items.sort_unstable();
        items.dedup();
        for &i in &items {
            a.push(acc(table::STOCK, sc::stock_key(p.w, i), &[sc::s::QUANTITY], &[], false));
        }
        StockLevel { p, items, accesses: a }
    }

    /// The result: distinct items of the last 20 orders with S_QUANTITY below the
    /// threshold (`None` when the view does not hold the home warehouse).
    pub fn low_stock(&self, v: &ReadView<'_>) -> Option<usize> {
        let base = self.p.lines.len();
        (0..self.items.len())
            .map(|k| num(v, base + k, sc::s::QUANTITY).map(|q| q < self.p.threshold))
            .try_fold(0, |n, low| low.map(|l| n + l as usize))
    }
}

impl Procedure for StockLevel {
    fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    fn run(&self, v: &ReadView<'_>) -> Result<Vec<Write>, UserAbort> {
        for (k, &(_, _, i)) in self.p.lines.iter().enumerate() {
            if num(v, k, sc::ol::I_ID).is_some_and(|x| x != i as i64) {
                return Err(stale("order line"));
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
    }
}
