#if INGEST_FAULT_HOOKS
import Foundation
import Synchronization
#endif

/// Faults a test can have the process inflict on itself, at moments no signal from outside
/// can hit exactly: a `kill -9` at a journalled point, to prove it loses nothing, and
/// damage to a staged copy about to be uploaded, to prove it is never uploaded.
///
/// Compiled in only where `INGEST_FAULT_HOOKS` is defined, which Package.swift does for
/// debug builds (the ones the tests run). A release build, the one installed on stations,
/// has none of it: no environment variable can make it kill itself or touch a staged copy.
/// The fault suite (`make faults`) runs the release build and kills it from outside.
///
/// In debug builds, from the environment:
/// - `INGEST_TEST_STOP_AT=after-complete`: SIGKILL once the server has completed an object
///   and before the journal knows;
/// - `INGEST_TEST_STOP_AT=after-parts:N`: SIGKILL once N parts of this process are
///   acknowledged and journalled (or, for a file whose parts go out as it is copied,
///   acknowledged: nothing is journalled of those before the file is staged);
/// - `INGEST_TEST_STOP_AT=mhl-journalled`: SIGKILL once a card's ASC MHL generation is
///   written locally and journalled, before it is uploaded;
/// - `INGEST_TEST_STOP_AT=mhl-chain-uploaded`: SIGKILL once the chain naming it is in the
///   bucket, before its manifest;
/// - `INGEST_TEST_DAMAGE_STAGED=1`: flip the last byte of each staged copy before upload.
final class FaultHooks: Sendable {
    #if INGEST_FAULT_HOOKS
    private let stopAt: String?
    private let damagesStagedCopies: Bool
    private let partsJournalled = Atomic<Int>(0)

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        stopAt = environment["INGEST_TEST_STOP_AT"].flatMap { $0.isEmpty ? nil : $0 }
        damagesStagedCopies = environment["INGEST_TEST_DAMAGE_STAGED"] == "1"
    }

    func completed() { reached("after-complete") }
    /// A named point of a card's history being written (`mhl-…`).
    func at(_ point: String) { reached(point) }

    func partJournalled() {
        let count = partsJournalled.add(1, ordering: .relaxed).newValue
        reached("after-parts:\(count)")
    }

    /// Flips the last byte of a staged copy about to be uploaded, as a failing disk would.
    func damage(stagedCopy path: String) {
        guard damagesStagedCopies, let file = try? FileDescriptor(path: path, flags: .readWrite), let st = try? file.stat(),
            st.st_size > 0
        else { return }
        var byte: UInt8 = 0
        _ = withUnsafeMutableBytes(of: &byte) { try? file.readOnce(into: $0, at: Int64(st.st_size) - 1) }
        byte = ~byte
        _ = withUnsafeBytes(of: &byte) { try? file.writeOnce($0, at: Int64(st.st_size) - 1) }
    }

    private func reached(_ point: String) {
        guard let stopAt, stopAt == point else { return }
        System.killThisProcess()
    }
    #else
    init() {}
    @inline(__always) func completed() {}
    @inline(__always) func at(_ point: String) {}
    @inline(__always) func partJournalled() {}
    @inline(__always) func damage(stagedCopy path: String) {}
    #endif
}
