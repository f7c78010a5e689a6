//! QWERTY key adjacency for lowercase letters and digits, derived from the
//! key rows and their stagger (each row sits half a key to the right of the
//! row above), so neighbours include the diagonal keys: `a` → q w s z.

const ROWS: [&str; 4] = ["1234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm"];

fn key_at(row: usize, col: isize) -> Option<char> {
    if col < 0 {
        return None;
    }
    ROWS.get(row)?.chars().nth(col as usize)
}

/// Keys physically adjacent to `c` on a US QWERTY keyboard, in a fixed order
/// (same row left/right, row above, row below). Uppercase letters get
/// uppercase neighbours (digits stay digits); any other character has none.
pub fn keyboard_neighbours(c: char) -> Vec<char> {
    let lower = c.to_ascii_lowercase();
    let Some((row, col)) = ROWS.iter().enumerate().find_map(|(r, keys)| {
        keys.chars()
            .position(|k| k == lower)
            .map(|p| (r, p as isize))
    }) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(6);
    let mut push = |k: Option<char>| {
        if let Some(k) = k {
            out.push(if c.is_ascii_uppercase() {
                k.to_ascii_uppercase()
            } else {
                k
            });
        }
    };
    push(key_at(row, col - 1));
    push(key_at(row, col + 1));
    if row > 0 {
        push(key_at(row - 1, col));
        push(key_at(row - 1, col + 1));
    }
    push(key_at(row + 1, col - 1));
    push(key_at(row + 1, col));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_neighbours() {
        assert_eq!(keyboard_neighbours('a'), vec!['s', 'q', 'w', 'z']);
        assert_eq!(keyboard_neighbours('s'), vec!['a', 'd', 'w', 'e', 'z', 'x']);
        assert_eq!(keyboard_neighbours('q'), vec!['w', '1', '2', 'a']);
        assert_eq!(keyboard_neighbours('m'), vec!['n', 'j', 'k']);
        assert_eq!(keyboard_neighbours('1'), vec!['2', 'q']);
        assert_eq!(keyboard_neighbours('D'), vec!['S', 'F', 'E', 'R', 'X', 'C']);
        assert!(keyboard_neighbours('é').is_empty());
        assert!(keyboard_neighbours('?').is_empty());
    }

    #[test]
    fn adjacency_is_symmetric_and_total() {
        for row in ROWS {
            for c in row.chars() {
                let ns = keyboard_neighbours(c);
                assert!(!ns.is_empty(), "{c}");
                for n in ns {
                    assert!(keyboard_neighbours(n).contains(&c), "{c} -> {n}");
                }
            }
        }
    }
}
