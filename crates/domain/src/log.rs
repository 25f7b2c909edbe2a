//! Log lines a handler sends its client (`notifications/message`), at or above the level the
//! client asked for (`logging/setLevel` in a session, or `_meta` in the stateless era).

use std::sync::Arc;

/// The MCP (syslog) levels, least severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    pub const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.as_str() == text)
    }
}

type Deliver = dyn Fn(LogLevel, &str) + Send + Sync;

/// Where a handler logs for its client. A no-op when the client asked for no log level.
#[derive(Clone, Default)]
pub struct LogSink(Option<(LogLevel, Arc<Deliver>)>);

impl std::fmt::Debug for LogSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some((level, _)) => write!(f, "LogSink({})", level.as_str()),
            None => f.write_str("LogSink(none)"),
        }
    }
}

impl LogSink {
    pub fn none() -> Self {
        Self(None)
    }

    /// Delivers lines at `min` or above.
    pub fn new(min: LogLevel, deliver: impl Fn(LogLevel, &str) + Send + Sync + 'static) -> Self {
        Self(Some((min, Arc::new(deliver))))
    }

    /// Sends a line if the client asked for its level; whether it did.
    pub fn log(&self, level: LogLevel, message: &str) -> bool {
        match &self.0 {
            Some((min, deliver)) if level >= *min => {
                deliver(level, message);
                true
            }
            _ => false,
        }
    }

    pub fn info(&self, message: &str) -> bool {
        self.log(LogLevel::Info, message)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn only_lines_at_or_above_the_asked_level_go_out() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        let sink =
            LogSink::new(LogLevel::Warning, move |l, m| kept.lock().unwrap().push(format!("{}:{m}", l.as_str())));
        assert!(!sink.info("quiet"));
        assert!(sink.log(LogLevel::Error, "loud"));
        assert_eq!(*seen.lock().unwrap(), ["error:loud"]);
        assert!(!LogSink::none().log(LogLevel::Emergency, "nobody listens"));
        assert_eq!(LogLevel::parse("notice"), Some(LogLevel::Notice));
        assert_eq!(LogLevel::parse("verbose"), None);
    }
}
