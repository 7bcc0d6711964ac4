//! A card URL as a QR code drawn with Unicode half blocks, for a phone to
//! scan off a terminal. `serve --web` prints it on stderr when stderr is a
//! terminal (into a log file it would only be noise; the URL line is
//! printed either way). It draws; it decides nothing.

use qrcodegen::{QrCode, QrCodeEcc};

/// The quiet zone around the code, in modules (the standard asks for 4;
/// terminals usually have a margin of their own, so 2 scans well).
const QUIET_ZONE: i32 = 2;

/// The QR code of `text` as lines of `█`, `▀`, `▄` and spaces (two rows
/// of modules per line), dark modules drawn as spaces on a light
/// background so it scans on dark and light terminals alike; `None` when
/// the text is too long for a QR code.
///
/// ```
/// let drawn = plan_server::web::qr::render("http://127.0.0.1:8080/card/00").ok_or("fits")?;
/// assert!(drawn.lines().count() > 10);
/// # Ok::<(), &str>(())
/// ```
pub fn render(text: &str) -> Option<String> {
    let code = QrCode::encode_text(text, QrCodeEcc::Low).ok()?;
    let size = code.size();
    let light = |x: i32, y: i32| !code.get_module(x, y);
    let mut out = String::new();
    let mut y = -QUIET_ZONE;
    while y < size + QUIET_ZONE {
        for x in -QUIET_ZONE..size + QUIET_ZONE {
            out.push(match (light(x, y), light(x, y + 1)) {
                (true, true) => '█',
                (true, false) => '▀',
                (false, true) => '▄',
                (false, false) => ' ',
            });
        }
        out.push('\n');
        y += 2;
    }
    Some(out)
}
