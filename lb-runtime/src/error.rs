//! The one error type of lb-runtime: every failure (driver, JIT, simulator, bad input) is a value.

use std::path::PathBuf;

/// Everything that can go wrong between host data and a finished launch.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A CUDA driver call failed; `message` is the driver's own description.
    #[error("CUDA error while {context}: {message}")]
    Cuda { context: String, message: String },
    /// The driver could not JIT-compile the PTX; `log` is ptxas's error log.
    #[error("the driver rejected the PTX ({message}); ptxas said:\n{log}")]
    Jit { message: String, log: String },
    /// The simulator failed while running a kernel or touching its memory.
    #[error("simulator: {0}")]
    Sim(#[from] lb_ptx::sim::SimError),
    /// The simulator could not parse the PTX text.
    #[error("simulator could not parse the PTX: {0}")]
    Parse(#[from] lb_ptx::sim::ParseError),
    /// A `checked` kernel indexed parameter `param` at `index`, outside its length.
    #[error("index {index} is out of bounds for `{param}`")]
    OutOfBounds { param: String, index: u64 },
    /// Arguments whose sizes do not fit together (an output too short, …).
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// `launch_with` asked for a schedule the attribute did not generate.
    #[error("schedule `{requested}` was not generated; generated: {generated}")]
    ScheduleNotGenerated {
        requested: String,
        generated: String,
    },
    /// A plan whose kernels read tile offsets of one width was asked to run over a tile set
    /// that stores the other (`lb_ptx::plan::OffsetWidth`); nothing was launched.
    #[error(
        "`{schedule}` plan `{entry}` reads {plan_bits}-bit tile offsets, but the tile set stores \
         {tile_set_bits}-bit ones: run the plan of the tile set's width"
    )]
    OffsetWidthMismatch {
        schedule: String,
        entry: String,
        plan_bits: u32,
        tile_set_bits: u32,
    },
    /// A kernel entry named by a plan is not in the module.
    #[error("kernel `{0}` is not in the PTX module")]
    MissingKernel(String),
    /// Device memory was used with a device other than the one that allocated it; `what`
    /// names it (a launch's argument, or the buffer of a copy).
    #[error(
        "{what} belongs to another device than the one it was used with: upload it to this \
         device, or use it with the device that allocated it"
    )]
    DeviceMismatch { what: String },
    /// A kernel pushed more items into the queue `param` than it holds. The items that fit are
    /// kept; grow the queue to `needed` (after undoing the launch's other effects) and rerun.
    #[error("queue `{param}` overflowed: needed {needed} slots, the queue holds {capacity}")]
    QueueOverflow {
        param: String,
        needed: u64,
        capacity: u64,
    },
    /// A stream capture or graph used in a way it cannot be (synchronizing while capturing,
    /// allocating inside a capture, …); the message says what to do instead.
    #[error("stream capture: {0}")]
    Capture(String),
    /// A schedule written outside lb ([`crate::UserSchedule`]) could not build its kernels
    /// for a kernel; the message says why (lb-ptx's generation error).
    #[error("schedule `{schedule}` cannot build the kernel `{kernel}`: {message}")]
    UserSchedule {
        schedule: String,
        kernel: String,
        message: String,
    },
    /// Host data that does not form a valid sparse matrix.
    #[error("invalid matrix: {0}")]
    InvalidMatrix(String),
    /// A Matrix Market file that cannot be read; `line` is 1-based.
    #[error("Matrix Market line {line}: {message}")]
    MatrixMarket { line: usize, message: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Wraps a driver error with what we were doing, keeping the driver's own message.
    pub(crate) fn cuda(context: impl Into<String>, err: cudarc::driver::DriverError) -> Error {
        let message = match (err.error_name(), err.error_string()) {
            (Ok(name), Ok(text)) => {
                format!("{}: {}", name.to_string_lossy(), text.to_string_lossy())
            }
            _ => format!("{:?}", err.0),
        };
        Error::Cuda {
            context: context.into(),
            message,
        }
    }
}
