//! The gyre server binary (being written).
#![forbid(unsafe_code)]

mod cli;

fn main() {
    match cli::parse(std::env::args().skip(1)) {
        Ok(c) if c.help => print!("{}", cli::USAGE),
        Ok(_) => {}
        Err(e) => eprintln!("gyre: {e}"),
    }
}
