//! The TPC-C schema as redt tables (configs/tpcc.yaml): table ids, cell indices, key
//! packing, value encoding, the scale of a load and the spec's random generators.
//!
//! Keys are `(w - 1) << 40 | local` with every table `partitioning: { shift: 40 }`, so
//! every row of warehouse `w` (its copy of ITEM included) lives in partition
//! `(w - 1) % partitions`. Local parts:
//!
//! | table          | local part                         |
//! |----------------|------------------------------------|
//! | WAREHOUSE      | 0                                  |
//! | DISTRICT       | d                                  |
//! | CUSTOMER       | d << 12 \| c                       |
//! | CUSTOMER_LAST  | d << 20 \| name << 8 \| rank      |
//! | HISTORY        | slot << 32 \| seq (below)          |
//! | NEW_ORDER      | d << 32 \| o                       |
//! | ORDERS         | d << 32 \| o                       |
//! | ORDER_LINE     | d << 36 \| o << 4 \| ol            |
//! | ITEM, STOCK    | i                                  |
//! | ORDER_CUSTOMER | d << 36 \| c << 24 \| (2^24 − 1 − o) |
//!
//! Two tables are secondary indexes read by range reads through the ordered
//! index: CUSTOMER_LAST has one row per customer, keyed by its last-name number and its rank
//! by C_FIRST among the customers of its district with that last name (cell: C_ID), so the
//! customers with one last name are one key range in C_FIRST order; ORDER_CUSTOMER has one
//! row per order, keyed by its customer and the order id *reversed* (cell: O_ID), so a
//! customer's orders are one key range, newest first, and the tree's ascending scan finds
//! the last order as the first row. Order ids stay below 2^24 ([`MAX_O_ID`]).
//!
//! HISTORY has no primary key in TPC-C; a row's key only has to be unique: slot 0 holds
//! the loaded rows (`seq = d << 12 | c`), slot `1 + t` the rows Payment attempts of the
//! warehouse's terminal `t` create (`seq` counts that terminal's attempts).
//!
//! Numbers are i64 little-endian (money in cents, tax and discount in 1/10,000), dates are
//! milliseconds since the Unix epoch (0 = null), strings fixed-width and zero-padded.
//! A record whose every cell is zero holds no row (dc-executor `RecordView::is_absent`):
//! a transaction's upsert creates such records, and a delete writes zero to every cell.
//! Only Delivery deletes (its NEW_ORDER row); a NEW_ORDER row's one cell, `no_present`, is
//! 1 so that the row is not all zero. Other rows exist by a cell no row leaves zero:
//! ORDERS `o_ol_cnt > 0`, ORDER_LINE `ol_i_id > 0`, HISTORY `h_c_id > 0`, ITEM `i_im_id > 0`.

use rand::Rng;
use redt_proto::{Locking, Partitioning, TableId, Topology};

/// Low key bits below the warehouse (`partitioning: { shift: 40 }`).
pub const SHIFT: u32 = 40;
/// Districts per warehouse (clause 4.3.3.1).
pub const DISTRICTS: u32 = 10;
/// Most order lines per order (clause 2.4.1.3).
pub const MAX_OL: u32 = 15;
/// Most customers of one district sharing a last name (ranks 0..=126 in CUSTOMER_LAST).
pub const MAX_SAME_LAST: usize = 127;
/// Highest order id (ORDER_CUSTOMER reverses order ids in 24 bits).
pub const MAX_O_ID: u64 = (1 << 24) - 1;

/// Table ids of configs/tpcc.yaml.
pub mod table {
    use redt_proto::TableId;
    /// WAREHOUSE.
    pub const WAREHOUSE: TableId = TableId(1);
    /// DISTRICT.
    pub const DISTRICT: TableId = TableId(2);
    /// CUSTOMER.
    pub const CUSTOMER: TableId = TableId(3);
    /// HISTORY.
    pub const HISTORY: TableId = TableId(4);
    /// NEW-ORDER.
    pub const NEW_ORDER: TableId = TableId(5);
    /// ORDER.
    pub const ORDERS: TableId = TableId(6);
    /// ORDER-LINE.
    pub const ORDER_LINE: TableId = TableId(7);
    /// ITEM (one copy per warehouse).
    pub const ITEM: TableId = TableId(8);
    /// STOCK.
    pub const STOCK: TableId = TableId(9);
    /// The last-name index: one row per customer, by (last name, rank by C_FIRST).
    pub const CUSTOMER_LAST: TableId = TableId(10);
    /// The orders of each customer, newest first.
    pub const ORDER_CUSTOMER: TableId = TableId(12);
}

/// WAREHOUSE cells.
pub mod w {
    /// W_NAME (10).
    pub const NAME: u16 = 0;
    /// W_STREET_1, W_STREET_2, W_CITY, W_STATE, W_ZIP (71).
    pub const ADDRESS: u16 = 1;
    /// W_TAX.
    pub const TAX: u16 = 2;
    /// W_YTD.
    pub const YTD: u16 = 3;
}

/// DISTRICT cells.
pub mod d {
    /// D_NAME (10).
    pub const NAME: u16 = 0;
    /// D_STREET_1 .. D_ZIP (71).
    pub const ADDRESS: u16 = 1;
    /// D_TAX.
    pub const TAX: u16 = 2;
    /// D_YTD.
    pub const YTD: u16 = 3;
    /// D_NEXT_O_ID.
    pub const NEXT_O_ID: u16 = 4;
}

/// CUSTOMER cells.
pub mod c {
    /// C_FIRST (16).
    pub const FIRST: u16 = 0;
    /// C_MIDDLE (2).
    pub const MIDDLE: u16 = 1;
    /// C_LAST (16).
    pub const LAST: u16 = 2;
    /// C_STREET_1 .. C_ZIP (71).
    pub const ADDRESS: u16 = 3;
    /// C_PHONE (16).
    pub const PHONE: u16 = 4;
    /// C_SINCE.
    pub const SINCE: u16 = 5;
    /// C_CREDIT (2): `GC` or `BC`.
    pub const CREDIT: u16 = 6;
    /// C_CREDIT_LIM.
    pub const CREDIT_LIM: u16 = 7;
    /// C_DISCOUNT.
    pub const DISCOUNT: u16 = 8;
    /// C_BALANCE.
    pub const BALANCE: u16 = 9;
    /// C_YTD_PAYMENT.
    pub const YTD_PAYMENT: u16 = 10;
    /// C_PAYMENT_CNT.
    pub const PAYMENT_CNT: u16 = 11;
    /// C_DELIVERY_CNT.
    pub const DELIVERY_CNT: u16 = 12;
    /// C_DATA (500).
    pub const DATA: u16 = 13;
}

/// HISTORY cells.
pub mod h {
    /// H_C_ID.
    pub const C_ID: u16 = 0;
    /// H_C_D_ID.
    pub const C_D_ID: u16 = 1;
    /// H_C_W_ID.
    pub const C_W_ID: u16 = 2;
    /// H_D_ID.
    pub const D_ID: u16 = 3;
    /// H_DATE.
    pub const DATE: u16 = 4;
    /// H_AMOUNT.
    pub const AMOUNT: u16 = 5;
    /// H_DATA (24).
    pub const DATA: u16 = 6;
}

/// NEW-ORDER cells.
pub mod no {
    /// 1 in every row: NEW-ORDER's columns are all in its key, and a record whose every cell
    /// is zero holds no row (a deleted or never filled one).
    pub const PRESENT: u16 = 0;
    /// Every cell of a NEW-ORDER record: a delete writes zero to each.
    pub const CELLS: &[u16] = &[PRESENT];
}

/// ORDER cells.
pub mod o {
    /// O_C_ID.
    pub const C_ID: u16 = 0;
    /// O_ENTRY_D.
    pub const ENTRY_D: u16 = 1;
    /// O_CARRIER_ID (0 = null).
    pub const CARRIER_ID: u16 = 2;
    /// O_OL_CNT.
    pub const OL_CNT: u16 = 3;
    /// O_ALL_LOCAL.
    pub const ALL_LOCAL: u16 = 4;
}

/// ORDER-LINE cells.
pub mod ol {
    /// OL_I_ID.
    pub const I_ID: u16 = 0;
    /// OL_SUPPLY_W_ID.
    pub const SUPPLY_W_ID: u16 = 1;
    /// OL_DELIVERY_D (0 = null).
    pub const DELIVERY_D: u16 = 2;
    /// OL_QUANTITY.
    pub const QUANTITY: u16 = 3;
    /// OL_AMOUNT.
    pub const AMOUNT: u16 = 4;
    /// OL_DIST_INFO (24).
    pub const DIST_INFO: u16 = 5;
}

/// ITEM cells.
pub mod i {
    /// I_IM_ID (1..10,000; 0 = no such item).
    pub const IM_ID: u16 = 0;
    /// I_PRICE.
    pub const PRICE: u16 = 1;
    /// I_NAME (24).
    pub const NAME: u16 = 2;
    /// I_DATA (50).
    pub const DATA: u16 = 3;
}

/// STOCK cells.
pub mod s {
    /// S_QUANTITY.
    pub const QUANTITY: u16 = 0;
    /// S_YTD.
    pub const YTD: u16 = 1;
    /// S_ORDER_CNT.
    pub const ORDER_CNT: u16 = 2;
    /// S_REMOTE_CNT.
    pub const REMOTE_CNT: u16 = 3;
    /// S_DIST_01 (24); district `d` is `DIST_01 + d - 1`.
    pub const DIST_01: u16 = 4;
    /// S_DATA (50).
    pub const DATA: u16 = 14;
}

/// CUSTOMER_LAST cells.
pub mod cl {
    /// C_ID of the customer.
    pub const C_ID: u16 = 0;
}

/// ORDER_CUSTOMER cells.
pub mod oc {
    /// O_ID of the order (never 0, so the row is never taken for a fresh record).
    pub const O_ID: u16 = 0;
}

/// The shape every table must have: (id, name, locking, cell sizes).
const EXPECTED: &[(TableId, &str, Locking, &[u32])] = &[
    (table::WAREHOUSE, "warehouse", Locking::Cell, &[10, 71, 8, 8]),
    (table::DISTRICT, "district", Locking::Cell, &[10, 71, 8, 8, 8]),
    (table::CUSTOMER, "customer", Locking::Cell, &[16, 2, 16, 71, 16, 8, 2, 8, 8, 8, 8, 8, 8, 500]),
    (table::HISTORY, "history", Locking::Record, &[8, 8, 8, 8, 8, 8, 24]),
    (table::NEW_ORDER, "new_order", Locking::Record, &[8]),
    (table::ORDERS, "orders", Locking::Record, &[8, 8, 8, 8, 8]),
    (table::ORDER_LINE, "order_line", Locking::Record, &[8, 8, 8, 8, 8, 24]),
    (table::ITEM, "item", Locking::Record, &[8, 8, 24, 50]),
    (table::STOCK, "stock", Locking::Cell, &[8, 8, 8, 8, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 50]),
    (table::CUSTOMER_LAST, "customer_last", Locking::Record, &[8]),
    (table::ORDER_CUSTOMER, "order_customer", Locking::Record, &[8]),
];

/// The tables TPC-C's range reads go through: they must have an ordered index, and
/// [`check_topology`] insists on it.
pub const RANGE_TABLES: [TableId; 4] =
    [table::NEW_ORDER, table::ORDER_LINE, table::CUSTOMER_LAST, table::ORDER_CUSTOMER];

/// Every TPC-C table id, in load order.
pub const TABLES: [TableId; 11] = [
    table::WAREHOUSE,
    table::DISTRICT,
    table::CUSTOMER,
    table::HISTORY,
    table::NEW_ORDER,
    table::ORDERS,
    table::ORDER_LINE,
    table::ITEM,
    table::STOCK,
    table::CUSTOMER_LAST,
    table::ORDER_CUSTOMER,
];

/// Checks that `topo` declares the TPC-C tables as configs/tpcc.yaml does (ids, names,
/// cell sizes, locking — record locking is accepted for a table of cell locking, which only
/// locks more —, `partitioning: { shift: 40 }`, an ordered index on the [`RANGE_TABLES`]).
///
/// # Errors
/// The first difference, as text.
pub fn check_topology(topo: &Topology) -> Result<(), String> {
    for &(id, name, locking, cells) in EXPECTED {
        let t = topo.table(id).ok_or_else(|| {
            format!("topology `{}` has no table id {} (`{name}`); use configs/tpcc.yaml", topo.name, id.0)
        })?;
        if t.name != name {
            return Err(format!("table id {} is `{}`, expected `{name}`", id.0, t.name));
        }
        let sizes: Vec<u32> = t.cells.iter().map(|c| c.bytes).collect();
        if sizes != cells {
            return Err(format!("table `{name}` has cells of {sizes:?} bytes, expected {cells:?}"));
        }
        // Record locking where cells are expected only locks more (the record-level baseline
        // of a CREST-style factor analysis); the other way round is refused.
        if t.locking != locking && !(locking == Locking::Cell && t.locking == Locking::Record) {
            return Err(format!("table `{name}` has {:?} locking, expected {locking:?}", t.locking));
        }
        if t.partitioning != (Partitioning::Shift { bits: SHIFT as u8 }) {
            return Err(format!("table `{name}` must use `partitioning: {{ shift: {SHIFT} }}`"));
        }
        if RANGE_TABLES.contains(&id) && !t.ordered {
            return Err(format!("table `{name}` needs `ordered_index: true` (TPC-C reads ranges of it)"));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------

fn wbase(w: u32) -> u64 {
    debug_assert!(w >= 1);
    ((w - 1) as u64) << SHIFT
}

/// WAREHOUSE key.
pub fn warehouse_key(w: u32) -> u64 {
    wbase(w)
}
/// DISTRICT key.
pub fn district_key(w: u32, d: u32) -> u64 {
    wbase(w) | d as u64
}
/// CUSTOMER key.
pub fn customer_key(w: u32, d: u32, c: u32) -> u64 {
    wbase(w) | (d as u64) << 12 | c as u64
}
/// CUSTOMER_LAST key of the customer of rank `rank` (0-based, by C_FIRST) among those
/// with last-name number `name` (0..999) in district (w, d).
pub fn customer_last_key(w: u32, d: u32, name: u32, rank: u32) -> u64 {
    debug_assert!(name < 1 << 12 && (rank as usize) < 256);
    wbase(w) | (d as u64) << 20 | (name as u64) << 8 | rank as u64
}
/// The CUSTOMER_LAST keys of last-name number `name` in district (w, d): every rank.
pub fn customer_last_range(w: u32, d: u32, name: u32) -> (u64, u64) {
    (customer_last_key(w, d, name, 0), customer_last_key(w, d, name, 255))
}
/// HISTORY key.
pub fn history_key(w: u32, slot: u32, seq: u64) -> u64 {
    debug_assert!(slot < 256 && seq < 1 << 32);
    wbase(w) | (slot as u64) << 32 | seq
}
/// NEW-ORDER key.
pub fn new_order_key(w: u32, d: u32, o: u64) -> u64 {
    wbase(w) | (d as u64) << 32 | o
}
/// The NEW-ORDER keys of district (w, d), first to last: its undelivered orders are the rows
/// among them, the oldest first.
pub fn new_order_range(w: u32, d: u32) -> (u64, u64) {
    (new_order_key(w, d, 0), new_order_key(w, d, MAX_O_ID))
}
/// ORDER key.
pub fn order_key(w: u32, d: u32, o: u64) -> u64 {
    wbase(w) | (d as u64) << 32 | o
}
/// ORDER-LINE key.
pub fn order_line_key(w: u32, d: u32, o: u64, ol: u32) -> u64 {
    debug_assert!(o < 1 << 32 && ol < 16);
    wbase(w) | (d as u64) << 36 | o << 4 | ol as u64
}
/// ORDER_CUSTOMER key of order `o` of customer `c` of district (w, d): the order id
/// reversed, so a customer's newest order has its lowest key.
pub fn order_customer_key(w: u32, d: u32, c: u32, o: u64) -> u64 {
    debug_assert!((1..=MAX_O_ID).contains(&o) && c < 1 << 12);
    wbase(w) | (d as u64) << 36 | (c as u64) << 24 | (MAX_O_ID - o.min(MAX_O_ID))
}
/// The ORDER_CUSTOMER keys of customer `c` of district (w, d), newest order first.
pub fn order_customer_range(w: u32, d: u32, c: u32) -> (u64, u64) {
    (order_customer_key(w, d, c, MAX_O_ID), order_customer_key(w, d, c, 1))
}
/// The order id an ORDER_CUSTOMER key names.
pub fn order_of_customer_key(key: u64) -> u64 {
    MAX_O_ID - (key & MAX_O_ID)
}
/// Key of item `i` in warehouse `w`'s copy of ITEM.
pub fn item_key(w: u32, i: u32) -> u64 {
    wbase(w) | i as u64
}
/// STOCK key.
pub fn stock_key(w: u32, i: u32) -> u64 {
    wbase(w) | i as u64
}

/// Bit mask of `cells`.
pub fn mask(cells: &[u16]) -> u64 {
    cells.iter().fold(0, |m, &c| m | 1 << c)
}

// ---------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------

/// An i64 cell value.
pub fn num(v: i64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// Reads an i64 cell value (missing bytes are zero).
pub fn get(v: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    let n = v.len().min(8);
    b[..n].copy_from_slice(&v[..n]);
    i64::from_le_bytes(b)
}

/// A string cell value: `s` truncated to `width` bytes (the executor zero-pads it).
pub fn text(s: &[u8], width: usize) -> Vec<u8> {
    s[..s.len().min(width)].to_vec()
}

/// A string cell's text without its zero padding.
pub fn trim(v: &[u8]) -> &[u8] {
    let end = v.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
    &v[..end]
}

/// The customer a by-name selection picks among `ids` (sorted by C_FIRST): position
/// ceil(n / 2), 1-based (clause 2.5.2.2).
pub fn pick_by_name(ids: &[u32]) -> Option<u32> {
    if ids.is_empty() {
        None
    } else {
        Some(ids[ids.len().div_ceil(2) - 1])
    }
}

// ---------------------------------------------------------------------------------------
// Scale and random generators (clause 4.3.2, 2.1.6)
// ---------------------------------------------------------------------------------------

/// How much is loaded per warehouse. [`Scale::SPEC`] is clause 4.3.3.1; smaller scales are
/// for tests (every rule keeps its proportions: 70% of the orders delivered, names from the
/// first `min(1000, customers)` last names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Scale {
    /// Items (and stock rows per warehouse).
    pub items: u32,
    /// Customers per district (= orders per district at load).
    pub customers: u32,
    /// Undelivered orders per district at load (the last ones).
    pub new_orders: u32,
}

impl Scale {
    /// The specification's: 100,000 items, 3,000 customers and orders per district, 900
    /// of them undelivered.
    pub const SPEC: Scale = Scale { items: 100_000, customers: 3_000, new_orders: 900 };

    /// A small scale for tests: 1,000 items, 300 customers, 90 new orders per district.
    pub const SMALL: Scale = Scale { items: 1_000, customers: 300, new_orders: 90 };

    /// Orders per district at load.
    pub fn orders(&self) -> u32 {
        self.customers
    }

    /// Delivered orders per district at load (2,100 at spec scale): the constant of
    /// consistency condition 11.
    pub fn delivered(&self) -> u32 {
        self.customers - self.new_orders
    }

    /// Distinct last names in use (1,000 at spec scale).
    pub fn last_names(&self) -> u32 {
        self.customers.min(1000)
    }

    /// Checks the scale is usable.
    ///
    /// # Errors
    /// A rule it breaks, as text.
    pub fn validate(&self) -> Result<(), String> {
        if self.items < 100 || self.items >= 1 << 24 {
            return Err(format!("items must be 100 to 2^24 - 1, got {}", self.items));
        }
        if self.customers < 30 || self.customers >= 4096 {
            return Err(format!("customers per district must be 30 to 4095, got {}", self.customers));
        }
        if self.new_orders == 0 || self.new_orders >= self.customers {
            return Err(format!("new orders must be 1 to customers - 1, got {}", self.new_orders));
        }
        Ok(())
    }
}

/// The run-time constants C of NURand (clause 2.1.6): C_LAST differs between load and run
/// within the bounds of clause 2.1.6.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NuRand {
    /// C for C_LAST at load.
    pub c_last_load: u64,
    /// C for C_LAST while running.
    pub c_last_run: u64,
    /// C for C_ID.
    pub c_id: u64,
    /// C for OL_I_ID.
    pub ol_i_id: u64,
}

impl NuRand {
    /// Draws the constants.
    pub fn new(rng: &mut impl Rng) -> Self {
        let c_last_load = rng.gen_range(0..=255u64);
        let c_last_run = loop {
            let c = rng.gen_range(0..=255u64);
            let delta = c.abs_diff(c_last_load);
            if (65..=119).contains(&delta) && delta != 96 && delta != 112 {
                break c;
            }
        };
        NuRand { c_last_load, c_last_run, c_id: rng.gen_range(0..=1023), ol_i_id: rng.gen_range(0..=8191) }
    }
}

/// NURand(A, x, y) with constant `c` (clause 2.1.6).
pub fn nurand(rng: &mut impl Rng, a: u64, c: u64, x: u64, y: u64) -> u64 {
    (((rng.gen_range(0..=a) | rng.gen_range(x..=y)) + c) % (y - x + 1)) + x
}

const SYLLABLES: [&str; 10] = ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"];

/// The last name of number `n` (0..999; clause 4.3.2.3).
pub fn last_name(n: u32) -> Vec<u8> {
    let mut s = String::with_capacity(15);
    s.push_str(SYLLABLES[(n / 100) as usize % 10]);
    s.push_str(SYLLABLES[(n / 10) as usize % 10]);
    s.push_str(SYLLABLES[n as usize % 10]);
    s.into_bytes()
}

/// A random a-string of `lo..=hi` alphanumeric characters (clause 4.3.2.2).
pub fn astring(rng: &mut impl Rng, lo: usize, hi: usize) -> Vec<u8> {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let n = rng.gen_range(lo..=hi);
    (0..n).map(|_| A[rng.gen_range(0..A.len())]).collect()
}

/// A random n-string of `lo..=hi` digits.
pub fn nstring(rng: &mut impl Rng, lo: usize, hi: usize) -> Vec<u8> {
    let n = rng.gen_range(lo..=hi);
    (0..n).map(|_| b'0' + rng.gen_range(0..10u8)).collect()
}

/// I_DATA / S_DATA: 26..50 characters, 10% with "ORIGINAL" at a random position.
pub fn data_string(rng: &mut impl Rng) -> Vec<u8> {
    let mut s = astring(rng, 26, 50);
    if rng.gen_bool(0.1) {
        let at = rng.gen_range(0..=s.len() - 8);
        s[at..at + 8].copy_from_slice(b"ORIGINAL");
    }
    s
}

/// A random address: street 1, street 2, city (10..20 each), state (2 letters), zip
/// (4 digits + "11111"), as one 71-byte cell.
pub fn address(rng: &mut impl Rng) -> Vec<u8> {
    let mut v = Vec::with_capacity(71);
    for _ in 0..3 {
        let mut f = astring(rng, 10, 20);
        f.resize(20, 0);
        v.extend_from_slice(&f);
    }
    for _ in 0..2 {
        v.push(b'A' + rng.gen_range(0..26u8));
    }
    v.extend_from_slice(&nstring(rng, 4, 4));
    v.extend_from_slice(b"11111");
    v
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn record_locking_is_accepted_only_where_cells_are_expected() {
        let yaml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/tpcc.yaml"))
            .expect("configs/tpcc.yaml");
        let check = |text: &str| check_topology(&Topology::from_yaml("tpcc.yaml", text).expect("parses"));
        assert_eq!(check(&yaml), Ok(()));
        assert_eq!(check(&yaml.replace("locking: cell", "locking: record")), Ok(()));
        let err = check(&yaml.replace("locking: record", "locking: cell")).unwrap_err();
        assert!(err.contains("has Cell locking, expected Record"), "{err}");
    }

    use super::*;

    #[test]
    fn new_order_cells_name_every_cell_of_the_table() {
        let (_, _, _, cells) = EXPECTED.iter().find(|e| e.0 == table::NEW_ORDER).expect("NEW_ORDER is expected");
        let all: Vec<u16> = (0..cells.len() as u16).collect();
        assert_eq!(no::CELLS, all.as_slice(), "a delete must write every cell");
    }

    #[test]
    fn a_districts_new_order_range_holds_its_keys_only() {
        let (from, to) = new_order_range(2, 5);
        for o in [1, 2101, MAX_O_ID] {
            assert!((from..=to).contains(&new_order_key(2, 5, o)));
        }
        for (w, d) in [(2, 4), (2, 6), (1, 5), (3, 5)] {
            assert!(!(from..=to).contains(&new_order_key(w, d, 1)));
            assert!(!(from..=to).contains(&new_order_key(w, d, MAX_O_ID)));
        }
    }
}
