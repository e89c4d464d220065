//! Type names as errors and refusals show them: paths dropped, generic
//! arguments nested deep elided when long.

/// `text` with every path in a Rust type name cut to its last segment
/// (`air::queries::ysb::YsbSource<a::B>` → `YsbSource<B>`), for errors.
pub(crate) fn short_type_names(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else if c == ':' && chars.peek() == Some(&':') {
            // A path segment ends: drop it.
            chars.next();
            word.clear();
        } else {
            out.push_str(&word);
            word.clear();
            out.push(c);
        }
    }
    out.push_str(&word);
    out
}

/// `text` with the generic arguments nested two deep or more elided
/// (`…`) when it is longer than 120 characters: a chain's tail type
/// carries its whole stream's closures, and a refusal must stay readable
/// (`PartitionTail<q10_files<…>{{closure}}, …>`).
pub(crate) fn brief_type_names(text: &str) -> String {
    if text.chars().count() <= 120 {
        return text.to_string();
    }
    let mut out = String::with_capacity(128);
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '<' => {
                depth += 1;
                if depth <= 2 {
                    out.push(c);
                }
                if depth == 2 {
                    out.push('…');
                }
            }
            '>' => {
                if depth <= 2 {
                    out.push(c);
                }
                depth = depth.saturating_sub(1);
            }
            _ if depth < 2 => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn type_names_in_errors_lose_their_paths() {
        assert_eq!(
            super::short_type_names("source air::queries::ysb::YsbSource; a::B<c::D, u64>"),
            "source YsbSource; B<D, u64>"
        );
        assert_eq!(
            super::short_type_names("q8::build::{{closure}}"),
            "{{closure}}"
        );
    }

    #[test]
    fn long_type_names_in_refusals_elide_what_is_nested_deep() {
        let short = "operator KeyedProcess<u64, Acc, StateNotSaved>";
        assert_eq!(super::brief_type_names(short), short);
        let long = format!(
            "the end of a chain, PartitionTail<files<SourceHead<Full>, {}>{{{{closure}}}}, Sink>",
            "EventTime<FlatMap<Identity, {{closure}}, Option<Row>>, {{closure}}>".repeat(3)
        );
        assert_eq!(
            super::brief_type_names(&long),
            "the end of a chain, PartitionTail<files<…>{{closure}}, Sink>"
        );
    }
}
