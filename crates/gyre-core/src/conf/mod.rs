//! nginx-syntax configuration (being written).
