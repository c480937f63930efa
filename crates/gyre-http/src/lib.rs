//! gyre's HTTP/1.1 module (being written).
#![forbid(unsafe_code)]
