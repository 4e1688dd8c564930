//! JSON text for people: re-indented as stored (numbers never re-printed), cut to a size; the
//! event browser shows events' data with it.

/// `json` pretty-printed, cut at `max` bytes (on a character boundary) with a note of its size.
pub(crate) fn shown(json: &str, max: usize) -> String {
    let mut pretty = pretty(json);
    if pretty.len() > max {
        let mut cut = max;
        while !pretty.is_char_boundary(cut) {
            cut -= 1;
        }
        pretty.truncate(cut);
        pretty.push_str(&format!("\n… ({} bytes in all)", json.len()));
    }
    pretty
}

/// Re-indents JSON text (two spaces a level) without parsing it into numbers, so what is shown
/// is exactly what is stored (a big integer stays as written). The store checked it is JSON.
pub(crate) fn pretty(json: &str) -> String {
    let mut out = String::with_capacity(json.len() * 2);
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut chars = json.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n("  ", depth));
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                while chars.peek().is_some_and(|n| n.is_whitespace()) {
                    chars.next();
                }
                if matches!(chars.peek(), Some('}' | ']')) {
                    out.extend(chars.next());
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_reindented_as_written() {
        let text = r#"{"a":[1,{"b":"x,{y}\"z:"}],"e":{},"f":[ ],"big":123456789012345678901234}"#;
        let want = "{\n  \"a\": [\n    1,\n    {\n      \"b\": \"x,{y}\\\"z:\"\n    }\n  ],\n  \
                    \"e\": {},\n  \"f\": [],\n  \"big\": 123456789012345678901234\n}";
        assert_eq!(pretty(text), want);
        assert_eq!(pretty("\"just a string\""), "\"just a string\"");
        let long = format!("\"{}\"", "é".repeat(4096));
        let shown = shown(&long, 4096);
        assert!(shown.len() < 4096 + 40, "{}", shown.len());
        assert!(shown.ends_with(&format!("({} bytes in all)", long.len())));
    }
}
