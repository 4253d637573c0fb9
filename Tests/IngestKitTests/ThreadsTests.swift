import Foundation
import Testing

@testable import IngestKit

@Suite struct ThreadsTests {
    /// What `top -H`, `ps -L` and `perf` show for the thread: the kernel's name for it.
    @Test func aDedicatedThreadCarriesItsNameToTheKernel() async throws {
        let name = await onDedicatedThread("ingest-check") {
            (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "(unreadable)"
        }
        #expect(name == "ingest-check\n")
    }
}
