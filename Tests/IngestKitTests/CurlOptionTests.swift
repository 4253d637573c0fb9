import Testing

@testable import IngestKit

/// Every option the transport sets is checked: one libcurl refuses fails the request, named.
@Suite struct CurlOptionTests {
    @Test func anOptionLibcurlRefusesFailsTheRequestNamingTheOptionWithoutRetry() async {
        var settings = TransportSettings()
        settings.lowSpeedBytesPerSecond = -1  // libcurl answers CURLE_BAD_FUNCTION_ARGUMENT
        let transport = CurlTransport(settings: settings)
        // Refused before any connection: nothing listens on the discard port anyway.
        await #expect {
            _ = try await transport.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:9/"))
        } throws: { error in
            guard let error = error as? TransportError else { return false }
            return error.kind == .optionRefused && error.code == 43
                && error.message == "libcurl refused the option CURLOPT_LOW_SPEED_LIMIT: A libcurl function was given a bad argument"
        }
        #expect(RetryPolicy.classify(.transport(.optionRefused)) == .permanent)
    }
}
