//! plan-audit-export: the audit chain of a plan-checkpoint database leaves
//! the machine as OpenTelemetry log records (the logs signal, OTLP/HTTP with
//! `http/json` or `http/protobuf`), and comes back for a check.
//!
//! The database is the source of truth: the [`Exporter`] runs on its own
//! thread with its own connection, reads the records after the persistent
//! cursor, sends them, and moves the cursor only after the collector
//! answered 2xx. A collector that is down or refusing, or a process killed
//! mid-batch, loses nothing: the next exporter resends from the cursor, and
//! a resent record is byte-identical (its encoding depends only on the
//! database and the configuration). Nothing here runs inside a decision or
//! slows one. [`verify_against`] compares the chain with records a
//! collector kept (OTLP/JSON lines).
//!
//! It speaks OTLP with a small hand-written encoder and a blocking
//! HTTP/1.1 client over `std::net`, through TLS (rustls, ring) for
//! `https://` endpoints: no async runtime. It decides nothing about the checkpoint and writes nothing but
//! the export cursor.

mod bound;
mod compare;
mod config;
mod exporter;
mod http;
mod otlp;
mod tls;

pub use compare::{
    CollectorFile, CollectorFinding, CollectorRecord, Comparison, DATABASE_ID_ATTRIBUTE, ParseError,
    parse_collector_lines, read_collector_file, verify_against,
};
pub use config::{
    ConfigError, DEFAULT_MAX_REQUEST_BYTES, DEFAULT_SERVICE_NAME, ExportConfig, ExportOverrides,
    MIN_MAX_REQUEST_BYTES, Protocol, parse_list,
};
pub use exporter::{ExportEvent, ExportObserver, ExportStartError, ExportStatus, Exporter};
pub use otlp::{Origin, encode_json, encode_protobuf};
