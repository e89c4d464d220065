//! NEXMark: the event model, generator and JSON-lines files (in progress).
