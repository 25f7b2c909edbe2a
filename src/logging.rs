//! Log lines on standard error, as text or as one JSON object per line (`--log-format json`).
//! Every line written while a request is answered carries that exchange's correlation id (the
//! one in its `X-Correlation-Id` header, its audit rows and its refusal envelope): the formatter reads
//! it from the request's task when, and only when, a line is written, so the hot path pays
//! nothing for it (a span per request would cost an allocation on every call).

use toolgate_domain::text::escape_controls;
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{Format, Full, Json, JsonFields, Writer};
use tracing_subscriber::fmt::time::SystemTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, with `correlation_id` on every line (null outside a request).
    Json,
}

impl From<toolgate_agent::cli::LogFormat> for LogFormat {
    fn from(format: toolgate_agent::cli::LogFormat) -> Self {
        match format {
            toolgate_agent::cli::LogFormat::Text => LogFormat::Text,
            toolgate_agent::cli::LogFormat::Json => LogFormat::Json,
        }
    }
}

/// Installs the subscriber: level filter from `TOOLGATE_LOG` (default `info`).
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLGATE_LOG").unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.event_format(Correlated(Format::<Full>::default())).fmt_fields(EscapedFields).init(),
        LogFormat::Json => builder
            .event_format(Correlated(tracing_subscriber::fmt::format().json().flatten_event(true)))
            .fmt_fields(JsonFields::new())
            .init(),
    }
}

/// Wraps a formatter: the line it writes, plus the correlation id of the request being
/// answered (a JSON line's first key; a text line's last field).
struct Correlated<F>(F);

impl<S, N, F> FormatEvent<S, N> for Correlated<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N> + IsJson,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> std::fmt::Result {
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        let id = crate::correlation::current();
        if F::JSON {
            let Some(rest) = line.strip_prefix('{') else {
                return writer.write_str(&line);
            };
            let id = serde_json::to_string(&id).map_err(|_| std::fmt::Error)?;
            return write!(writer, "{{\"correlation_id\":{id},{rest}");
        }
        match id {
            Some(id) => writeln!(writer, "{} correlation_id={id}", line.trim_end_matches('\n')),
            None => writer.write_str(&line),
        }
    }
}

/// Text lines' fields, each value with its control characters escaped
/// ([`escape_controls`]): a field can carry what an agent sent (a hostname, a frame's error),
/// and a newline in it must not forge a log line, nor an escape sequence colour the terminal.
/// JSON lines need nothing more: JSON strings escape every control character.
struct EscapedFields;

impl<'writer> FormatFields<'writer> for EscapedFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> std::fmt::Result {
        let mut visitor = EscapingVisitor { writer: &mut writer, first: true, result: Ok(()) };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct EscapingVisitor<'a, 'writer> {
    writer: &'a mut Writer<'writer>,
    first: bool,
    result: std::fmt::Result,
}

impl tracing::field::Visit for EscapingVisitor<'_, '_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        let text = format!("{value:?}");
        let separator = if std::mem::take(&mut self.first) { "" } else { " " };
        self.result = match field.name() {
            "message" => write!(self.writer, "{separator}{}", escape_controls(&text)),
            // `log` crate records carry their origin in fields of their own, shown elsewhere.
            name if name.starts_with("log.") => Ok(()),
            name => write!(self.writer, "{separator}{name}={}", escape_controls(&text)),
        };
    }
}

/// Whether a formatter writes JSON objects.
trait IsJson {
    const JSON: bool;
}

impl IsJson for Format<Full> {
    const JSON: bool = false;
}

impl IsJson for Format<Json, SystemTime> {
    const JSON: bool = true;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captures what a subscriber of `format` writes while `work` runs.
    fn captured(format: LogFormat, work: impl FnOnce()) -> String {
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
        let sink = out.clone();
        let writer = move || Sink(sink.clone());
        let builder = tracing_subscriber::fmt().with_writer(writer).with_ansi(false);
        let dispatch = match format {
            LogFormat::Text => tracing::Dispatch::new(
                builder.event_format(Correlated(Format::<Full>::default())).fmt_fields(EscapedFields).finish(),
            ),
            LogFormat::Json => tracing::Dispatch::new(
                builder
                    .event_format(Correlated(tracing_subscriber::fmt::format().json().flatten_event(true)))
                    .fmt_fields(JsonFields::new())
                    .finish(),
            ),
        };
        tracing::dispatcher::with_default(&dispatch, work);
        String::from_utf8(out.lock().unwrap().clone()).unwrap()
    }

    struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn in_request(id: &str, work: impl FnOnce()) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(crate::correlation::scope(id.into(), async { work() }));
    }

    #[test]
    fn json_lines_carry_the_correlation_id_inside_a_request_and_null_outside() {
        let text = captured(LogFormat::Json, || {
            tracing::info!("before");
            in_request("corr-7", || tracing::warn!(tool = "x", "inside"));
        });
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["correlation_id"], serde_json::Value::Null);
        assert_eq!(lines[0]["message"], "before");
        assert_eq!(lines[1]["correlation_id"], "corr-7");
        assert_eq!(lines[1]["message"], "inside");
        assert_eq!(lines[1]["tool"], "x");
        assert_eq!(lines[1]["level"], "WARN");
    }

    #[test]
    fn text_lines_end_with_the_correlation_id_inside_a_request() {
        let text = captured(LogFormat::Text, || {
            tracing::info!("before");
            in_request("corr-8", || tracing::info!("inside"));
        });
        let lines: Vec<&str> = text.lines().collect();
        assert!(!lines[0].contains("correlation_id"), "{text}");
        assert!(lines[1].ends_with("inside correlation_id=corr-8"), "{text}");
    }

    /// Hardening round 2, LOW 11: a field carrying an agent's text with a newline forged a
    /// log line. Now every text field is escaped, and JSON lines stay one object each.
    #[test]
    fn agent_text_cannot_forge_a_line_or_colour_the_terminal() {
        let forged = "web-01\n2026-12-01T00:00:00Z  INFO toolgate: admin approved everything\u{1b}[2J";
        let text = captured(LogFormat::Text, || tracing::warn!(hostname = %forged, "report: {forged}"));
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(!text.contains('\u{1b}'), "{text:?}");
        assert!(text.contains("web-01\\n2026") && text.contains("hostname=web-01\\n"), "{text}");
        let json = captured(LogFormat::Json, || tracing::warn!(hostname = %forged, "report: {forged}"));
        assert_eq!(json.lines().count(), 1, "{json}");
        let line: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        assert_eq!(line["hostname"], forged, "JSON keeps the text exactly, escaped as JSON");
    }
}
