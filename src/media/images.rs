//! A user's picture prepared for a model: read (JPEG, PNG or WebP only, its declared size checked
//! before any pixel is decoded), turned upright by its EXIF orientation, scaled down so the long
//! edge is at most [`MAX_LONG_EDGE`] pixels, and written as a JPEG of at most
//! [`MAX_ENCODED_BYTES`] beside the original in the media cache. Every provider accepts the
//! result (Anthropic's 5 MB base64 cap is the tightest; 1568 px is the size past which Anthropic
//! scales down anyway, so larger images only cost tokens).
//!
//! [`prepare`] is CPU work (tens to hundreds of milliseconds for a phone photo): async callers
//! run it in `tokio::task::spawn_blocking`.

use crate::agent::ImagePart;
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits, RgbImage};
use std::io::{self, Cursor, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The long edge of a prepared image, in pixels (never scaled up to it).
pub const MAX_LONG_EDGE: u32 = 1568;
/// The largest prepared file: 3.75 MB is 5 MB in base64, Anthropic's per-image limit.
pub const MAX_ENCODED_BYTES: u64 = 3_750_000;
/// Sides longer than this are refused before decoding (a decompression bomb declares a huge
/// canvas in a few bytes).
const MAX_SOURCE_SIDE: u32 = 16_384;
/// Pixels decoded at most: 50 megapixels (a 48 MP phone photo passes).
const MAX_SOURCE_PIXELS: u64 = 50_000_000;
/// Memory the decoder may take (50 MP at 4 bytes a pixel, plus headroom).
const MAX_DECODE_ALLOC: u64 = 256 * 1024 * 1024;
/// Larger files are not read at all (the adapters already cap downloads well below this).
const MAX_SOURCE_BYTES: u64 = 64 * 1024 * 1024;
/// The first JPEG quality tried, then lower ones until the file fits.
const QUALITIES: &[u8] = &[85, 75, 65, 55, 45, 35];

/// A prepared picture in the media cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedImage {
    pub path: PathBuf,
    /// Always `image/jpeg`.
    pub media_type: &'static str,
    pub width: u32,
    pub height: u32,
    /// The file's size.
    pub bytes: u64,
}

impl PreparedImage {
    /// The reference a message keeps (without the data: [`crate::media::history_images`]
    /// attaches it per request).
    pub fn into_part(self) -> ImagePart {
        ImagePart {
            media_type: self.media_type.to_string(),
            path: self.path.to_string_lossy().into_owned(),
            width: self.width,
            height: self.height,
            data: None,
        }
    }
}

/// Why a picture could not be prepared. The text is fit for the user and the model.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("the picture is a {format} file; only JPEG, PNG and WebP pictures can be read")]
    Unsupported { format: String },
    #[error(
        "the picture claims to be {width}x{height} pixels, more than is read ({MAX_SOURCE_SIDE} pixels a side, {MAX_SOURCE_PIXELS} in all)"
    )]
    TooLarge { width: u32, height: u32 },
    #[error("the picture is a {bytes}-byte file, more than the {MAX_SOURCE_BYTES} bytes read")]
    FileTooLarge { bytes: u64 },
    #[error("the picture could not be decoded: {0}")]
    Decode(String),
    #[error("the picture could not be encoded: {0}")]
    Encode(String),
}

/// Prepare `original` for a model and write the result into `out_dir` (see the module doc).
/// Blocking CPU work: run it in `spawn_blocking`.
pub fn prepare(original: &Path, out_dir: &Path) -> Result<PreparedImage, ImageError> {
    let io_error = |source| ImageError::Io { path: original.to_path_buf(), source };
    let len = std::fs::metadata(original).map_err(io_error)?.len();
    if len > MAX_SOURCE_BYTES {
        return Err(ImageError::FileTooLarge { bytes: len });
    }
    let bytes = std::fs::read(original).map_err(io_error)?;
    let picture = decode_upright(&bytes)?;
    let (width, height) = fitted(picture.width(), picture.height());
    let rgb = flatten_on_white(picture);
    let rgb = if (width, height) == rgb.dimensions() {
        rgb
    } else {
        image::imageops::resize(&rgb, width, height, image::imageops::FilterType::CatmullRom)
    };
    let jpeg = encode_within(&rgb, MAX_ENCODED_BYTES)?;
    let path = write_private(out_dir, &prepared_stem(original), &jpeg)?;
    Ok(PreparedImage { path, media_type: "image/jpeg", width, height, bytes: jpeg.len() as u64 })
}

/// The decoded picture, upright, after its declared size was checked against the limits.
fn decode_upright(bytes: &[u8]) -> Result<DynamicImage, ImageError> {
    let format = image::guess_format(bytes).ok();
    if !matches!(format, Some(ImageFormat::Jpeg | ImageFormat::Png | ImageFormat::WebP)) {
        return Err(ImageError::Unsupported { format: format_name(bytes, format) });
    }
    let mut reader = ImageReader::new(Cursor::new(bytes)).with_guessed_format().map_err(|e| ImageError::Decode(e.to_string()))?;
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SOURCE_SIDE);
    limits.max_image_height = Some(MAX_SOURCE_SIDE);
    limits.max_alloc = Some(MAX_DECODE_ALLOC);
    reader.limits(limits);
    let mut decoder = reader.into_decoder().map_err(|e| refusal(bytes, e))?;
    let (width, height) = decoder.dimensions();
    if width > MAX_SOURCE_SIDE || height > MAX_SOURCE_SIDE || u64::from(width) * u64::from(height) > MAX_SOURCE_PIXELS {
        return Err(ImageError::TooLarge { width, height });
    }
    // A picture whose EXIF block is unreadable is shown as stored rather than refused.
    let orientation = decoder.orientation().unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut picture = DynamicImage::from_decoder(decoder).map_err(|e| ImageError::Decode(e.to_string()))?;
    picture.apply_orientation(orientation);
    Ok(picture)
}

/// A decoder's refusal: the limits' one says how large the picture claimed to be, where its
/// header can be read.
fn refusal(bytes: &[u8], e: image::ImageError) -> ImageError {
    match (&e, declared_size(bytes)) {
        (image::ImageError::Limits(_), Some((width, height))) => ImageError::TooLarge { width, height },
        _ => ImageError::Decode(e.to_string()),
    }
}

/// The size a header declares, read without limits and without decoding a pixel.
fn declared_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let mut reader = ImageReader::new(Cursor::new(bytes)).with_guessed_format().ok()?;
    reader.no_limits();
    reader.into_decoder().ok().map(|d| d.dimensions())
}

/// What a file is, for the refusal a user reads.
fn format_name(bytes: &[u8], guessed: Option<ImageFormat>) -> String {
    if bytes.len() >= 12 && &bytes[4..8] == b"ftyp" {
        let brand = String::from_utf8_lossy(&bytes[8..12]).to_ascii_lowercase();
        return match brand.as_str() {
            "heic" | "heix" | "hevc" | "heim" | "heis" | "mif1" | "msf1" => "HEIC".to_string(),
            "avif" | "avis" => "AVIF".to_string(),
            _ => format!("video or ISO media ({brand})"),
        };
    }
    match guessed {
        Some(format) => format.extensions_str().first().map(|e| e.to_ascii_uppercase()).unwrap_or_else(|| format!("{format:?}")),
        None => "unrecognized (not a picture)".to_string(),
    }
}

/// `width`x`height` scaled so the long edge is at most [`MAX_LONG_EDGE`], never scaled up.
fn fitted(width: u32, height: u32) -> (u32, u32) {
    let long = width.max(height);
    if long <= MAX_LONG_EDGE {
        return (width, height);
    }
    let scale = |side: u32| ((u64::from(side) * u64::from(MAX_LONG_EDGE) + u64::from(long) / 2) / u64::from(long)).max(1) as u32;
    (scale(width), scale(height))
}

/// RGB pixels; transparent parts become white (JPEG has no alpha, and black, the usual default,
/// hides dark text on transparent screenshots).
fn flatten_on_white(picture: DynamicImage) -> RgbImage {
    if !picture.color().has_alpha() {
        return picture.into_rgb8();
    }
    let rgba = picture.into_rgba8();
    RgbImage::from_fn(rgba.width(), rgba.height(), |x, y| {
        let [r, g, b, a] = rgba.get_pixel(x, y).0;
        let over_white = |c: u8| ((u32::from(c) * u32::from(a) + 255 * (255 - u32::from(a)) + 127) / 255) as u8;
        image::Rgb([over_white(r), over_white(g), over_white(b)])
    })
}

/// The JPEG at the highest of [`QUALITIES`] that fits `max_bytes`.
fn encode_within(rgb: &RgbImage, max_bytes: u64) -> Result<Vec<u8>, ImageError> {
    let mut last = Vec::new();
    for &quality in QUALITIES {
        last.clear();
        let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut last, quality);
        rgb.write_with_encoder(encoder).map_err(|e| ImageError::Encode(e.to_string()))?;
        if last.len() as u64 <= max_bytes {
            return Ok(last);
        }
    }
    Err(ImageError::Encode(format!("still {} bytes at the lowest quality, over {max_bytes}", last.len())))
}

/// The original's file stem, kept to safe characters, as the prepared file's name stem.
fn prepared_stem(original: &Path) -> String {
    let stem = original.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let safe: String = stem.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).take(80).collect();
    if safe.is_empty() { "image".to_string() } else { safe }
}

/// Write `bytes` to a new private file (0600, never through an existing path: the same rule as
/// `hermes_adapter::media_cache::create_private_file`, which is async; this runs on a blocking
/// thread) named `<stem>.prepared.jpg`, or `<stem>.prepared-2.jpg`, … when that exists.
fn write_private(out_dir: &Path, stem: &str, bytes: &[u8]) -> Result<PathBuf, ImageError> {
    for n in 1..=100 {
        let name = if n == 1 { format!("{stem}.prepared.jpg") } else { format!("{stem}.prepared-{n}.jpg") };
        let path = out_dir.join(name);
        let opened = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path);
        let mut file = match opened {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(ImageError::Io { path, source }),
        };
        if let Err(source) = file.write_all(bytes).and_then(|()| file.sync_all()) {
            // A half-written file must not pass for a prepared picture.
            let _ = std::fs::remove_file(&path);
            return Err(ImageError::Io { path, source });
        }
        return Ok(path);
    }
    Err(ImageError::Io {
        path: out_dir.join(format!("{stem}.prepared.jpg")),
        source: io::Error::other("100 prepared copies already exist"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{ImageEncoder, Rgba, RgbaImage};

    fn write_png(dir: &Path, name: &str, picture: &DynamicImage) -> PathBuf {
        let path = dir.join(name);
        picture.save_with_format(&path, ImageFormat::Png).unwrap();
        path
    }

    fn gradient(width: u32, height: u32) -> DynamicImage {
        DynamicImage::ImageRgb8(RgbImage::from_fn(width, height, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, ((x + y) % 256) as u8])
        }))
    }

    fn read_back(prepared: &PreparedImage) -> DynamicImage {
        let bytes = std::fs::read(&prepared.path).unwrap();
        assert_eq!(image::guess_format(&bytes).unwrap(), ImageFormat::Jpeg, "the prepared file is a JPEG");
        assert_eq!(bytes.len() as u64, prepared.bytes);
        image::load_from_memory(&bytes).unwrap()
    }

    #[test]
    fn a_large_photo_is_scaled_to_the_long_edge_and_written_privately() {
        let dir = tempfile::tempdir().unwrap();
        let original = write_png(dir.path(), "photo.png", &gradient(4000, 3000));
        let prepared = prepare(&original, dir.path()).unwrap();
        assert_eq!((prepared.width, prepared.height), (1568, 1176));
        assert_eq!(prepared.media_type, "image/jpeg");
        assert_eq!(prepared.path, dir.path().join("photo.prepared.jpg"));
        let back = read_back(&prepared);
        assert_eq!((back.width(), back.height()), (1568, 1176));
        assert!(prepared.bytes <= MAX_ENCODED_BYTES);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&prepared.path).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(original.exists(), "the original stays beside it");
        let again = prepare(&original, dir.path()).unwrap();
        assert_eq!(again.path, dir.path().join("photo.prepared-2.jpg"), "an existing file is never overwritten");
    }

    #[test]
    fn a_tall_picture_is_fitted_by_its_height() {
        let dir = tempfile::tempdir().unwrap();
        let original = write_png(dir.path(), "receipt.png", &gradient(800, 3200));
        let prepared = prepare(&original, dir.path()).unwrap();
        assert_eq!((prepared.width, prepared.height), (392, 1568));
    }

    #[test]
    fn a_small_picture_keeps_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let original = write_png(dir.path(), "icon.png", &gradient(64, 48));
        let prepared = prepare(&original, dir.path()).unwrap();
        assert_eq!((prepared.width, prepared.height), (64, 48), "never scaled up");
        assert_eq!(read_back(&prepared).width(), 64);
    }

    #[test]
    fn transparency_becomes_white() {
        let dir = tempfile::tempdir().unwrap();
        let clear = RgbaImage::from_fn(40, 40, |x, _| if x < 20 { Rgba([0, 0, 0, 0]) } else { Rgba([0, 0, 0, 255]) });
        let original = write_png(dir.path(), "screenshot.png", &DynamicImage::ImageRgba8(clear));
        let back = read_back(&prepare(&original, dir.path()).unwrap()).into_rgb8();
        let transparent = back.get_pixel(5, 20).0;
        let opaque = back.get_pixel(35, 20).0;
        assert!(transparent.iter().all(|&c| c > 240), "transparent pixels are white, not black: {transparent:?}");
        assert!(opaque.iter().all(|&c| c < 15), "opaque black stays black: {opaque:?}");
    }

    #[test]
    fn exif_orientation_turns_the_picture_upright() {
        let dir = tempfile::tempdir().unwrap();
        // A landscape JPEG whose EXIF says "rotate 90° clockwise to display" (orientation 6).
        let mut jpeg = Vec::new();
        let mut encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 90);
        let exif = b"MM\0\x2a\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01\0\x06\0\0\0\0\0\0".to_vec();
        encoder.set_exif_metadata(exif).unwrap();
        encoder.write_image(gradient(300, 200).as_bytes(), 300, 200, image::ExtendedColorType::Rgb8).unwrap();
        let original = dir.path().join("phone.jpg");
        std::fs::write(&original, jpeg).unwrap();
        let prepared = prepare(&original, dir.path()).unwrap();
        assert_eq!((prepared.width, prepared.height), (200, 300));
    }

    /// A small PNG whose header claims `width`x`height` (checksums valid): a decompression
    /// bomb's shape, its few bytes of compressed data standing for a canvas of zeros.
    fn png_header(width: u32, height: u32) -> Vec<u8> {
        let mut ihdr = width.to_be_bytes().to_vec();
        ihdr.extend(height.to_be_bytes());
        ihdr.extend([8, 6, 0, 0, 0]);
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        for (kind, data) in [(&b"IHDR"[..], ihdr), (b"IDAT", vec![0x78, 0x9c, 0x03, 0x00]), (b"IEND", Vec::new())] {
            let mut chunk = kind.to_vec();
            chunk.extend(&data);
            png.extend((data.len() as u32).to_be_bytes());
            png.extend(&chunk);
            png.extend(crc32(&chunk).to_be_bytes());
        }
        png
    }

    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }

    #[test]
    fn a_decompression_bomb_is_refused_from_its_header() {
        let dir = tempfile::tempdir().unwrap();
        for (width, height) in [(100_000, 100_000), (10_000, 10_000)] {
            let original = dir.path().join(format!("bomb-{width}.png"));
            std::fs::write(&original, png_header(width, height)).unwrap();
            let err = prepare(&original, dir.path()).unwrap_err();
            assert!(matches!(err, ImageError::TooLarge { width: w, height: h } if (w, h) == (width, height)), "{err}");
            assert!(err.to_string().contains(&format!("{width}x{height}")), "{err}");
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2, "nothing was written");
    }

    #[test]
    fn other_formats_and_junk_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let cases: [(&str, &[u8], &str); 3] = [
            ("anim.gif", b"GIF89a\x01\0\x01\0\0\0\0;", "GIF"),
            ("IMG_0001.heic", b"\0\0\0\x18ftypheic\0\0\0\0mif1heic", "HEIC"),
            ("notes.jpg", b"this is not a picture at all", "unrecognized"),
        ];
        for (name, bytes, named) in cases {
            let original = dir.path().join(name);
            std::fs::write(&original, bytes).unwrap();
            let err = prepare(&original, dir.path()).unwrap_err();
            assert!(matches!(err, ImageError::Unsupported { .. }), "{name}: {err}");
            assert!(err.to_string().contains(named) && err.to_string().contains("JPEG, PNG and WebP"), "{err}");
        }
        let truncated = dir.path().join("cut.png");
        let mut png = png_header(10, 10);
        png.truncate(20);
        std::fs::write(&truncated, png).unwrap();
        assert!(matches!(prepare(&truncated, dir.path()).unwrap_err(), ImageError::Decode(_)));
    }

    #[test]
    fn the_part_names_the_prepared_file_without_data() {
        let prepared = PreparedImage { path: "/c/images/a.prepared.jpg".into(), media_type: "image/jpeg", width: 3, height: 2, bytes: 9 };
        let part = prepared.into_part();
        assert_eq!((part.path.as_str(), part.width, part.height, part.data), ("/c/images/a.prepared.jpg", 3, 2, None));
    }
}
