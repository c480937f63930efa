//! The stub_status page, byte for byte nginx's format, so
//! prometheus-nginx-exporter, Telegraf and Datadog read it unchanged.

use gyre_core::process::shm::StatsSnapshot;

/// nginx's text, trailing spaces included.
pub fn render(s: &StatsSnapshot) -> String {
    format!(
        "Active connections: {} \nserver accepts handled requests\n {} {} {} \nReading: {} Writing: {} Waiting: {} \n",
        s.active.max(0),
        s.accepted,
        s.handled,
        s.requests,
        s.reading.max(0),
        s.writing.max(0),
        s.waiting.max(0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_format() {
        let s = StatsSnapshot {
            accepted: 16630948,
            handled: 16630948,
            requests: 31070465,
            active: 291,
            reading: 6,
            writing: 179,
            waiting: 106,
        };
        assert_eq!(
            render(&s),
            "Active connections: 291 \nserver accepts handled requests\n 16630948 16630948 31070465 \nReading: 6 Writing: 179 Waiting: 106 \n"
        );
    }
}
