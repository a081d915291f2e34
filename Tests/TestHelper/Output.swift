import Glibc

/// Writes `text` to standard error unbuffered (the C `stderr` global is not concurrency-safe in Swift 6).
func writeToStandardError(_ text: String) {
    var copy = text
    copy.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(2, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += written
        }
    }
}
