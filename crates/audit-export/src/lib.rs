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

mod compare;
mod config;
mod exporter;
mod http;
mod otlp;
mod tls;

pub use compare::{CollectorRecord, Comparison, ParseError, parse_collector_lines, verify_against};
pub use config::{ConfigError, DEFAULT_SERVICE_NAME, ExportConfig, ExportOverrides, Protocol, parse_list};
pub use exporter::{ExportStartError, ExportStatus, Exporter};
pub use otlp::{encode_json, encode_protobuf};
