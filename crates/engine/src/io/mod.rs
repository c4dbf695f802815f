//! placeholder (WAL helper owns this)
