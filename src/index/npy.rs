//! NumPy `.npy` matrices of float32: how precomputed document vectors reach `capot index build`
//! (`numpy.save("vectors.npy", matrix.astype("<f4"))`) so that a large corpus is encoded once,
//! wherever that is cheapest, and never again.
//!
//! Format versions 1.0–3.0, little-endian `<f4`, C order, two dimensions. Anything else is
//! refused with what was found.

use std::io::{BufReader, Read, Write};
use std::path::Path;

use super::IndexError;

const MAGIC: &[u8] = b"\x93NUMPY";

/// A row-major float32 matrix read from a `.npy` file.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyMatrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

fn invalid(path: &Path, message: impl Into<String>) -> IndexError {
    IndexError::InvalidInput(format!("{}: {}", path.display(), message.into()))
}

/// Shape and data offset of a 2-D little-endian float32 `.npy` file, checked against its size.
struct Header {
    rows: usize,
    cols: usize,
    data_start: u64,
}

fn read_header(path: &Path) -> Result<(Header, BufReader<std::fs::File>), IndexError> {
    let file = std::fs::File::open(path).map_err(|e| IndexError::io(path, e))?;
    let file_len = file.metadata().map_err(|e| IndexError::io(path, e))?.len();
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)
        .map_err(|_| invalid(path, "too short to be a .npy file"))?;
    if &magic[..6] != MAGIC {
        return Err(invalid(path, "not a .npy file (no \\x93NUMPY magic)"));
    }
    let header_len = match magic[6] {
        1 => {
            let mut b = [0u8; 2];
            r.read_exact(&mut b)
                .map_err(|_| invalid(path, "truncated header"))?;
            u16::from_le_bytes(b) as usize
        }
        2 | 3 => {
            let mut b = [0u8; 4];
            r.read_exact(&mut b)
                .map_err(|_| invalid(path, "truncated header"))?;
            u32::from_le_bytes(b) as usize
        }
        v => {
            return Err(invalid(
                path,
                format!(".npy format version {v} is not supported"),
            ))
        }
    };
    if header_len > 1 << 20 {
        return Err(invalid(path, "header longer than 1 MiB"));
    }
    let mut header = vec![0u8; header_len];
    r.read_exact(&mut header)
        .map_err(|_| invalid(path, "truncated header"))?;
    let header = String::from_utf8_lossy(&header);
    let (rows, cols) = parse_header(&header).map_err(|m| invalid(path, m))?;
    let count = rows
        .checked_mul(cols)
        .filter(|c| c.checked_mul(4).is_some())
        .ok_or_else(|| invalid(path, "shape too large"))?;
    let data_start = 8 + if magic[6] == 1 { 2 } else { 4 } + header_len as u64;
    let expected = data_start + count as u64 * 4;
    if file_len != expected {
        return Err(invalid(
            path,
            format!(
                "{file_len} bytes, expected {expected} for a {rows} × {cols} float32 matrix (truncated or trailing data)"
            ),
        ));
    }
    Ok((
        Header {
            rows,
            cols,
            data_start,
        },
        r,
    ))
}

/// Reads a 2-D little-endian float32 `.npy` file into memory.
pub fn read_f32_matrix(path: &Path) -> Result<NpyMatrix, IndexError> {
    let (Header { rows, cols, .. }, mut r) = read_header(path)?;
    let count = rows * cols;
    let mut data = vec![0f32; count];
    let mut buf = vec![0u8; 1 << 20];
    let mut filled = 0usize;
    while filled < count {
        let take = ((count - filled) * 4).min(buf.len());
        r.read_exact(&mut buf[..take])
            .map_err(|e| IndexError::io(path, e))?;
        for (dst, src) in data[filled..filled + take / 4]
            .iter_mut()
            .zip(buf[..take].chunks_exact(4))
        {
            *dst = f32::from_le_bytes([src[0], src[1], src[2], src[3]]);
        }
        filled += take / 4;
    }
    Ok(NpyMatrix { rows, cols, data })
}

/// A 2-D little-endian float32 `.npy` file memory-mapped and read a row at a time: how a
/// build takes vectors larger than memory (the OS pages them in and out as they are read).
pub struct NpyRows {
    map: memmap2::Mmap,
    rows: usize,
    cols: usize,
    data_start: usize,
}

impl NpyRows {
    /// Maps `path` after checking its header and size.
    pub fn open(path: &Path) -> Result<Self, IndexError> {
        let (header, r) = read_header(path)?;
        // SAFETY: read-only mapping of a file the caller names as its input; a file truncated
        // underneath would fault, which is the documented contract of every mapped input.
        let map =
            unsafe { memmap2::Mmap::map(r.get_ref()) }.map_err(|e| IndexError::io(path, e))?;
        #[cfg(unix)]
        let _ = map.advise(memmap2::Advice::Sequential);
        Ok(NpyRows {
            map,
            rows: header.rows,
            cols: header.cols,
            data_start: usize::try_from(header.data_start).unwrap_or(usize::MAX),
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns (the dimension).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Copies row `i` into `out` (`cols` values); `false` when `i` is out of range.
    pub fn row(&self, i: usize, out: &mut [f32]) -> bool {
        if i >= self.rows || out.len() != self.cols {
            return false;
        }
        let start = self.data_start + i * self.cols * 4;
        let bytes = &self.map[start..start + self.cols * 4];
        for (dst, src) in out.iter_mut().zip(bytes.chunks_exact(4)) {
            *dst = f32::from_le_bytes([src[0], src[1], src[2], src[3]]);
        }
        true
    }
}

/// The shape of a header dict such as
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (1000, 384), }`.
fn parse_header(h: &str) -> Result<(usize, usize), String> {
    let value = |key: &str| -> Result<&str, String> {
        let at = h
            .find(&format!("'{key}'"))
            .ok_or_else(|| format!("header has no {key:?}: {}", h.trim()))?;
        let rest = &h[at + key.len() + 2..];
        let colon = rest
            .find(':')
            .ok_or_else(|| format!("malformed header: {}", h.trim()))?;
        Ok(rest[colon + 1..].trim_start())
    };
    let descr = value("descr")?;
    if !(descr.starts_with("'<f4'") || descr.starts_with("'float32'")) {
        let shown: String = descr.chars().take_while(|c| *c != ',').collect();
        return Err(format!(
            "dtype {shown} is not little-endian float32 ('<f4'); convert with .astype('<f4')"
        ));
    }
    if value("fortran_order")?.starts_with("True") {
        return Err("Fortran-ordered array; save a C-ordered one (numpy.ascontiguousarray)".into());
    }
    let shape = value("shape")?;
    let inner = shape
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| format!("malformed shape in header: {}", h.trim()))?;
    let dims: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| format!("bad shape ({inner})"))
        })
        .collect::<Result<_, _>>()?;
    match dims.as_slice() {
        [rows, cols] => Ok((*rows, *cols)),
        _ => Err(format!(
            "shape ({inner}) is not 2-D; expected (documents, dimension)"
        )),
    }
}

/// Writes a row-major float32 matrix as a version 1.0 `.npy` file (what `numpy.save` writes).
pub fn write_f32_matrix(
    path: &Path,
    rows: usize,
    cols: usize,
    data: &[f32],
) -> Result<(), IndexError> {
    if Some(data.len()) != rows.checked_mul(cols) {
        return Err(IndexError::InvalidInput(format!(
            "{} values do not make a {rows} × {cols} matrix",
            data.len()
        )));
    }
    let mut header =
        format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let file = std::fs::File::create(path).map_err(|e| IndexError::io(path, e))?;
    let mut w = std::io::BufWriter::new(file);
    let io = |e| IndexError::io(path, e);
    w.write_all(MAGIC).map_err(io)?;
    w.write_all(&[1, 0]).map_err(io)?;
    w.write_all(&(header.len() as u16).to_le_bytes())
        .map_err(io)?;
    w.write_all(header.as_bytes()).map_err(io)?;
    for v in data {
        w.write_all(&v.to_le_bytes()).map_err(io)?;
    }
    w.flush().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reads_numpy_headers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.npy");
        let data: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 1.0).collect();
        write_f32_matrix(&path, 3, 4, &data).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!((bytes.len() - 12 * 4) % 64, 0, "header aligned to 64 bytes");
        let m = read_f32_matrix(&path).unwrap();
        assert_eq!((m.rows, m.cols, m.data), (3, 4, data));
        // Headers as numpy writes them, with and without the trailing comma.
        assert_eq!(
            parse_header("{'descr': '<f4', 'fortran_order': False, 'shape': (10, 384), }"),
            Ok((10, 384))
        );
        assert_eq!(
            parse_header("{'descr':'<f4','fortran_order':False,'shape':(7,2)}"),
            Ok((7, 2))
        );
    }

    #[test]
    fn refuses_what_it_cannot_read_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.npy");
        let write_header = |h: &str, payload: usize| {
            let mut b = MAGIC.to_vec();
            b.extend([1, 0]);
            b.extend((h.len() as u16).to_le_bytes());
            b.extend(h.as_bytes());
            b.extend(vec![0u8; payload]);
            std::fs::write(&path, b).unwrap();
        };
        let cases = [
            (
                "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }",
                32,
                "float32",
            ),
            (
                "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                16,
                "Fortran",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
                16,
                "2-D",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                12,
                "truncated",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                20,
                "trailing",
            ),
            ("{'fortran_order': False, 'shape': (2, 2), }", 16, "descr"),
        ];
        for (header, payload, want) in cases {
            write_header(header, payload);
            let err = read_f32_matrix(&path).unwrap_err().to_string();
            assert!(err.contains(want), "{header}: {err}");
        }
        std::fs::write(&path, b"hello").unwrap();
        let err = read_f32_matrix(&path).unwrap_err().to_string();
        assert!(err.contains("too short"), "{err}");
        std::fs::write(&path, b"PK\x03\x04 zip archive").unwrap();
        let err = read_f32_matrix(&path).unwrap_err().to_string();
        assert!(err.contains("magic"), "{err}");
    }
}
