//! The error every P4Runtime check produces: a canonical gRPC code plus a message that names the
//! offending object, so a client sees *what* was wrong, not just that something was.

use std::fmt;

use tonic::Code;

use crate::state::StateError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct P4Error {
    pub code: Code,
    pub message: String,
}

pub type P4Result<T> = Result<T, P4Error>;

impl P4Error {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        P4Error { code, message: message.into() }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidArgument, message)
    }
    pub fn out_of_range(message: impl Into<String>) -> Self {
        Self::new(Code::OutOfRange, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Code::NotFound, message)
    }
    pub fn unimplemented(message: impl Into<String>) -> Self {
        Self::new(Code::Unimplemented, message)
    }
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(Code::PermissionDenied, message)
    }
    pub fn failed_precondition(message: impl Into<String>) -> Self {
        Self::new(Code::FailedPrecondition, message)
    }

    /// Prefix the message with where the problem is (for example "update 3: ").
    pub fn context(mut self, what: impl fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }
}

impl fmt::Display for P4Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl From<P4Error> for tonic::Status {
    fn from(e: P4Error) -> Self {
        tonic::Status::new(e.code, e.message)
    }
}

impl From<StateError> for P4Error {
    fn from(e: StateError) -> Self {
        match e {
            StateError::InvalidArgument(m) => P4Error::new(Code::InvalidArgument, m),
            StateError::NotFound(m) => P4Error::new(Code::NotFound, m),
            StateError::AlreadyExists(m) => P4Error::new(Code::AlreadyExists, m),
            StateError::OutOfRange(m) => P4Error::new(Code::OutOfRange, m),
            StateError::ResourceExhausted(m) => P4Error::new(Code::ResourceExhausted, m),
            StateError::FailedPrecondition(m) => P4Error::new(Code::FailedPrecondition, m),
        }
    }
}
