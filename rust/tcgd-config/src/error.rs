//! Config errors: each names the file, the line and the key, so a typo is found before
//! compilation starts.

#[derive(Debug, Clone, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read the config: {message}")]
    Io { file: String, message: String },

    #[error("{file}:{line}: {message}")]
    Syntax {
        file: String,
        line: usize,
        message: String,
    },

    #[error("{file}:{line}: {key}: {message}")]
    Invalid {
        file: String,
        line: usize,
        key: String,
        message: String,
    },
}
