//! Feed stdin to one simulated client and print the raw reply bytes: used to
//! compare byte-for-byte with a real redis-server (`nc`), no sockets here.
use std::io::{Read, Write};

fn main() {
    let mut input = Vec::new();
    if std::io::stdin().read_to_end(&mut input).is_err() {
        return;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let mut server = gyre_kv::Server::new(gyre_kv::Config::default(), now);
    let Ok(id) = server.connect("127.0.0.1:1", "127.0.0.1:6379", 8, now) else {
        return;
    };
    let mut out = Vec::new();
    let _ = server.feed(id, &input, now, &mut out);
    let _ = std::io::stdout().write_all(&out);
}
