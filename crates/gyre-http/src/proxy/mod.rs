pub mod cookie;
pub mod redirect;
