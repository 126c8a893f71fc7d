//! Control-side table entry lists (placeholder, being written).
pub struct TableStore {}
