//! Text input for word count (in progress).
