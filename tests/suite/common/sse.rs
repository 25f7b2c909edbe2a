//! Server-Sent Events as the tests read them: a whole chunked SSE body as JSON events, and
//! a streamed POST on a socket of its own (so a test can answer, leave or cancel mid-call).

use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::Value;

use super::{Response, Server};

/// The events of an SSE body sent with chunked transfer encoding, as JSON.
pub fn events(r: &Response) -> Vec<Value> {
    let mut body = String::new();
    let mut rest = r.body.as_str();
    // De-chunk: "<hex size>\r\n<data>\r\n" ... "0\r\n\r\n".
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16)
            .unwrap_or_else(|_| panic!("not a chunk size: {size:?} in {:?}", r.body));
        if size == 0 {
            break;
        }
        body.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
    // Comment-only events (": ...") keep the stream alive and carry nothing; a priming event
    // (an id and empty data) only gives a resume cursor.
    body.split("\n\n")
        .filter(|e| e.lines().any(|l| l.starts_with("data: ") && l.len() > "data: ".len()))
        .map(|e| {
            let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap_or_else(|| panic!("no data in {e:?}"));
            serde_json::from_str(data).unwrap()
        })
        .collect()
}

/// A streamed POST on a socket of its own (so the test can leave, cancel or stop the server
/// while it runs): the socket and the first bytes read (the head and the first frame).
pub fn open_stream(s: &Server, headers: &[(&str, &str)], body: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(s.addr).unwrap();
    let head: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\n{head}Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        s.addr,
        body.len()
    )
    .unwrap();
    let mut first = [0u8; 4096];
    let n = stream.read(&mut first).unwrap();
    (stream, String::from_utf8_lossy(&first[..n]).into_owned())
}

/// Everything the server still sends on `stream`, until it closes.
pub fn rest_of(mut stream: TcpStream) -> String {
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    String::from_utf8_lossy(&rest).into_owned()
}

/// Opens `GET /mcp` on a socket of its own with `headers`; the socket and the answer's head.
pub fn open_get(s: &Server, headers: &[(&str, &str)]) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(s.addr).unwrap();
    let head: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    write!(stream, "GET /mcp HTTP/1.1\r\nHost: {}\r\n{head}Connection: close\r\n\r\n", s.addr).unwrap();
    let text = read_until(&mut stream, "\r\n\r\n");
    (stream, text)
}

/// Reads `stream` until what was read contains `needle` (or the server closes it, or 60 s
/// pass: generous, so a loaded machine is slower, never flaky); everything read.
pub fn read_until(stream: &mut TcpStream, needle: &str) -> String {
    stream.set_read_timeout(Some(std::time::Duration::from_millis(200))).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    while std::time::Instant::now() < deadline && !String::from_utf8_lossy(&seen).contains(needle) {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// Everything `stream` has sent once it holds `needle`: `already` (what was read before),
/// and more only if that lacks it (a frame may come in a later segment).
pub fn read_through(stream: &mut TcpStream, already: String, needle: &str) -> String {
    match already.contains(needle) {
        true => already,
        false => already + &read_until(stream, needle),
    }
}

/// The `id:` of the SSE event whose data holds `needle`, and that data as JSON.
pub fn event_with(text: &str, needle: &str) -> (String, Value) {
    for event in text.split("\n\n") {
        let data = event.lines().find_map(|l| l.strip_prefix("data: "));
        if let Some(data) = data.filter(|d| d.contains(needle)) {
            let id = event.lines().find_map(|l| l.strip_prefix("id: ")).unwrap_or_default().to_string();
            return (id, serde_json::from_str(data).unwrap());
        }
    }
    panic!("no event with {needle} in {text}")
}
