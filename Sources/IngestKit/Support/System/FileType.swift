/// What kind of file a path names, as `stat(2)`'s mode says (``FileStatus/type``).
enum FileType: Sendable, Equatable {
    case regular
    case directory
    case symbolicLink
    /// A FIFO (named pipe).
    case fifo
    case characterDevice
    case blockDevice
    case socket
    /// A type this does not know.
    case unknown

    /// The type in words, with its article: "a FIFO (named pipe)".
    var described: String {
        switch self {
        case .regular: "a regular file"
        case .fifo: "a FIFO (named pipe)"
        case .characterDevice: "a device node (a character device)"
        case .blockDevice: "a device node (a block device)"
        case .directory: "a directory"
        case .socket: "a socket"
        case .symbolicLink: "a symbolic link"
        case .unknown: "not a file of a known kind"
        }
    }
}
