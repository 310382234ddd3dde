//! `--csv FILE`: one report as one CSV row, appended; the header is written when the file is
//! new (or empty). Nested report fields become dotted columns (`latency_ms.p99`); a list
//! of `[name, {…}]` pairs (the per-class figures) is keyed by name (`classes.rw-inter.committed`).

use serde::Serialize;
use serde_json::Value;
use std::io::Write;
use std::path::Path;

/// The report as `(column, value)` pairs, in field order.
///
/// # Errors
/// A report that does not serialize.
pub fn flatten<T: Serialize>(report: &T) -> Result<Vec<(String, String)>, String> {
    // serde_json's `preserve_order` feature (this crate's): objects keep their field order.
    let v = serde_json::to_value(report).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    walk("", &v, &mut out);
    Ok(out)
}

/// A report given as JSON text (an object), as `(column, value)` pairs in text order.
///
/// # Errors
/// Text that is not JSON.
pub fn flatten_json(text: &str) -> Result<Vec<(String, String)>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    walk("", &v, &mut out);
    Ok(out)
}

/// A leaf, or a list of leaves.
fn is_flat(v: &Value) -> bool {
    match v {
        Value::Array(items) => items.iter().all(is_leaf),
        Value::Object(_) => false,
        _ => true,
    }
}

/// Neither a list nor an object.
fn is_leaf(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

/// A leaf's cell: a string as is, a number as Rust prints it (`3` for 3.0), `true`/`false`,
/// nothing for null (and for a list or an object).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) if n.is_f64() => n.as_f64().map_or_else(|| n.to_string(), |x| x.to_string()),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null | Value::Array(_) | Value::Object(_) => String::new(),
    }
}

fn walk(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    let join = |k: &str| if prefix.is_empty() { k.to_string() } else { format!("{prefix}.{k}") };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                walk(&join(k), x, out);
            }
        }
        // A list of plain values (or of lists of them), whose length may vary from one
        // report to the next: one cell, `a; b` (`k=v; …` for pairs).
        Value::Array(items) if items.iter().all(is_flat) => {
            let cell = items
                .iter()
                .map(|x| match x {
                    Value::Array(inner) => inner.iter().map(text).collect::<Vec<_>>().join("="),
                    leaf => text(leaf),
                })
                .collect::<Vec<_>>()
                .join("; ");
            out.push((prefix.to_string(), cell));
        }
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                match x.as_array().map(Vec::as_slice) {
                    Some([name, named @ Value::Object(_)]) if is_leaf(name) => walk(&join(&text(name)), named, out),
                    _ => walk(&join(&i.to_string()), x, out),
                }
            }
        }
        leaf => out.push((prefix.to_string(), text(leaf))),
    }
}

/// One CSV field, quoted when it holds a comma, a quote or a line break (the `csv` crate's
/// rules; a lone empty field is written `""`).
pub fn field(s: &str) -> String {
    record([s])
}

/// One CSV record of `fields`, without the line break: each field quoted when it holds a
/// comma, a quote or a line break (written by the `csv` crate).
pub fn record<I, T>(fields: I) -> String
where
    I: IntoIterator<Item = T>,
    T: AsRef<[u8]>,
{
    let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(Vec::new());
    w.write_record(fields).expect("writing a record to memory cannot fail");
    let mut bytes = w.into_inner().expect("flushing to memory cannot fail");
    bytes.pop();
    String::from_utf8(bytes).expect("a record of UTF-8 fields is UTF-8")
}

fn line(fields: impl Iterator<Item = String>) -> String {
    record(fields)
}

/// Appends `row` to the CSV file `path`, writing the header first if the file is new or
/// empty.
///
/// # Errors
/// I/O errors; a file whose header differs from the row's columns (another kind of report:
/// use another file).
pub fn append_row(path: &Path, row: &[(String, String)]) -> Result<(), String> {
    let header = line(row.iter().map(|(k, _)| k.clone()));
    let existing = match std::fs::read_to_string(path) {
        Ok(s) => Some(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut text = String::new();
    match existing.as_deref().and_then(|s| s.lines().next()).filter(|l| !l.trim().is_empty()) {
        None => {
            text.push_str(&header);
            text.push('\n');
        }
        Some(first) if first == header => {}
        Some(_) => {
            return Err(format!(
                "{} already holds rows with other columns (another kind of report); append to another file",
                path.display()
            ))
        }
    }
    if existing.as_deref().is_some_and(|s| !s.is_empty() && !s.ends_with('\n')) {
        text.insert(0, '\n');
    }
    text.push_str(&line(row.iter().map(|(_, v)| v.clone())));
    text.push('\n');
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(text.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))
}

/// Appends the report given as JSON text as one row of `path` (see [`append_row`]).
///
/// # Errors
/// As [`append_row`], and text that is not JSON.
pub fn append_json(path: &Path, text: &str) -> Result<(), String> {
    append_row(path, &flatten_json(text)?)
}

/// Appends `report` as one row of `path` (see [`append_row`]).
///
/// # Errors
/// As [`append_row`].
pub fn append_report<T: Serialize>(path: &Path, report: &T) -> Result<(), String> {
    append_row(path, &flatten(report)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flattens_nested_reports_and_named_pairs() {
        #[derive(Serialize)]
        struct Inner {
            z: f64,
            d: &'static str,
        }
        #[derive(Serialize)]
        struct R {
            a: u32,
            b: Inner,
            classes: Vec<(String, Inner)>,
            l: Vec<u8>,
        }
        let r = R {
            a: 1,
            b: Inner { z: 2.5, d: "x,y" },
            classes: vec![("rw-inter".into(), Inner { z: 3.0, d: "" })],
            l: vec![7, 8],
        };
        let f = flatten(&r).unwrap();
        let keys: Vec<&str> = f.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "b.z", "b.d", "classes.rw-inter.z", "classes.rw-inter.d", "l"]);
        assert_eq!(f[1].1, "2.5");
        assert_eq!(f[5].1, "7; 8");
        let pairs = flatten(&vec![("lost".to_string(), 3u64), ("realtime".to_string(), 1)]).unwrap();
        assert_eq!(pairs, [(String::new(), "lost=3; realtime=1".to_string())]);
        assert_eq!(f[2].1, "x,y");
        assert_eq!(field("x,y"), "\"x,y\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn appends_rows_with_one_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/out.csv");
        append_report(&path, &json!({"x": 1, "y": "a"})).unwrap();
        append_report(&path, &json!({"x": 2, "y": "b,c"})).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "x,y\n1,a\n2,\"b,c\"\n");
        let err = append_report(&path, &json!({"z": 1})).unwrap_err();
        assert!(err.contains("other columns"), "{err}");
        // An empty file gets the header.
        let empty = dir.path().join("empty.csv");
        std::fs::write(&empty, "").unwrap();
        append_report(&empty, &json!({"x": 3})).unwrap();
        assert_eq!(std::fs::read_to_string(&empty).unwrap(), "x\n3\n");
    }
}
