//! "Did you mean ...?" for a call of an unknown function: the known name nearest to the one
//! written, by edit distance (insertions, deletions, substitutions and swaps of two adjacent
//! characters each count one), when it is near enough to be a typo (`Enum.jion` for
//! `Enum.join`, `lenght` for `length`), and none otherwise (`link`, a Phoenix helper that is
//! not built in, suggests nothing).

/// The helpers of Phoenix.HTML (2.x and 3.x) and Phoenix.LiveView that Phoenix 1.4-1.6 pages
/// call; galleon has `raw` only, so a call of one gets its own explanation.
const PHOENIX_HELPERS: &[&str] = &[
    "link",
    "button",
    "content_tag",
    "tag",
    "img_tag",
    "form_for",
    "form_tag",
    "text_input",
    "email_input",
    "password_input",
    "hidden_input",
    "number_input",
    "textarea",
    "label",
    "submit",
    "reset",
    "select",
    "checkbox",
    "radio_button",
    "csrf_meta_tag",
    "csrf_token_value",
    "html_escape",
    "safe_to_string",
    "javascript_escape",
    "error_tag",
    "live_render",
    "live_component",
    "live_patch",
    "live_redirect",
    "live_title_tag",
];

/// Whether `name` is a Phoenix.HTML or LiveView helper (`link`, `Phoenix.HTML.Link.link`).
pub(super) fn phoenix_helper(name: &str) -> bool {
    name.starts_with("Phoenix.HTML.") || PHOENIX_HELPERS.contains(&name)
}

/// The candidate `(name, arities)` nearest to `name`, shown as `name/arity` (the arity
/// called with when the candidate takes it, else its first), if one is near enough.
pub(super) fn suggest<'a>(
    name: &str,
    arity: usize,
    candidates: impl IntoIterator<Item = (&'a str, &'a [usize])>,
) -> Option<String> {
    // A typo is about one edit per four characters, at most three: `Enum.jion` (1),
    // `Strng.upcase` (1), `Enum.mapjoin` (1), not `link` for `min` (3 of 4).
    let allowed = (name.chars().count() / 4).clamp(1, 3);
    let mut best: Option<(usize, &str, &[usize])> = None;
    for (candidate, arities) in candidates {
        let d = distance(name, candidate);
        // Ties go to the candidate taking this arity (`Enum.count` for `Enum.cont/2`).
        let better = match best {
            None => true,
            Some((bd, _, bar)) => {
                d < bd || (d == bd && arities.contains(&arity) && !bar.contains(&arity))
            }
        };
        if d <= allowed && d > 0 && better {
            best = Some((d, candidate, arities));
        }
    }
    best.map(|(_, candidate, arities)| {
        let shown = if arities.contains(&arity) {
            arity
        } else {
            arities.first().copied().unwrap_or(arity)
        };
        format!("{candidate}/{shown}")
    })
}

/// The optimal string alignment distance between `a` and `b`, by characters.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows of the table: two back (for swaps), the previous and the current.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            cur[j] = d;
        }
        std::mem::swap(&mut before, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_the_name_meant() {
        assert_eq!(distance("Enum.jion", "Enum.join"), 1);
        assert_eq!(distance("lenght", "length"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
        let names: &[(&str, &[usize])] = &[
            ("Enum.join", &[1, 2]),
            ("length", &[1]),
            ("min", &[2]),
            ("Enum.count", &[1]),
            ("Enum.count", &[2]),
        ];
        let s = |n, a| suggest(n, a, names.iter().copied());
        assert_eq!(s("Enum.jion", 2).as_deref(), Some("Enum.join/2"));
        assert_eq!(s("lenght", 2).as_deref(), Some("length/1"));
        assert_eq!(s("Enum.cont", 2).as_deref(), Some("Enum.count/2"));
        assert_eq!(s("link", 2), None);
        assert!(phoenix_helper("link") && phoenix_helper("Phoenix.HTML.Tag.content_tag"));
        assert!(!phoenix_helper("Enum.join"));
    }
}
