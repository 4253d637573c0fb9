# One set of PUTs for bench-put-headers.sh: argv endpoint bucket weed-pid count set; prints
# "set ms-of-server-CPU-per-PUT". SigV4 by hand (the standard library's hmac and hashlib),
# so that the client is the same for every set and only the headers differ.
import base64, datetime, hashlib, hmac, http.client, os, sys, threading, urllib.parse

endpoint, bucket, pid, count, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
access, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
host = endpoint.split("//", 1)[1]
body = os.urandom(20_000)


def crc32c(data):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc = 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return (crc ^ 0xFFFFFFFF).to_bytes(4, "big")


checksum = base64.b64encode(crc32c(body)).decode()
md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
sha256 = hashlib.sha256(body).hexdigest()


def hmac256(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signed(path, extra, payload):
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    headers = {"host": host, "x-amz-date": stamp, "x-amz-content-sha256": payload, "content-type": "application/x-subrip"}
    headers.update({name.lower(): value for name, value in extra.items()})
    names = sorted(headers)
    canonical = "\n".join(["PUT", urllib.parse.quote(path), "", "".join(f"{n}:{headers[n]}\n" for n in names),
                           ";".join(names), payload])
    scope = f"{stamp[:8]}/us-east-1/s3/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n" + hashlib.sha256(canonical.encode()).hexdigest()
    key = hmac256(hmac256(hmac256(hmac256(("AWS4" + secret).encode(), stamp[:8]), "us-east-1"), "s3"), "aws4_request")
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = f"AWS4-HMAC-SHA256 Credential={access}/{scope}, SignedHeaders={';'.join(names)}, Signature={signature}"
    headers["content-length"] = str(len(body))
    return headers


def request(i):
    name = f"F{i:05d}.SRT"
    shallow, deep = f"{kind}/card/DCIM/100/{name}", f"{kind}/station-7/2026-11-27/card-ec923e93/DCIM/100/{name}"
    meta = {"x-amz-meta-original-name": name, "x-amz-meta-original-path": f"DCIM/100/{name}",
            "x-amz-meta-xxh128": "09700bcc25125e160da7199552cef626"}
    unsigned = "UNSIGNED-PAYLOAD"
    return {
        "warm": (shallow, {}, unsigned),
        "s5cmd": (shallow, {"Content-MD5": md5}, sha256),
        "crc": (shallow, {"x-amz-checksum-crc32c": checksum}, unsigned),
        "meta": (shallow, meta, unsigned),
        "deep": (deep, {}, unsigned),
        "inm": (shallow, {"If-None-Match": "*"}, unsigned),
        "ingest": (deep, {**meta, "x-amz-checksum-crc32c": checksum, "If-None-Match": "*"}, unsigned),
    }[kind]


def server_cpu_seconds():
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


failures = []


def send(first, last):
    connection = http.client.HTTPConnection(host, timeout=60)
    for i in range(first, last):
        key, extra, payload = request(i)
        path = f"/{bucket}/{key}"
        connection.request("PUT", path, body=body, headers=signed(path, extra, payload))
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            failures.append(f"{response.status} {path}")
            return


before = server_cpu_seconds()
senders = [threading.Thread(target=send, args=(n * count // 4, (n + 1) * count // 4)) for n in range(4)]
for sender in senders:
    sender.start()
for sender in senders:
    sender.join()
if failures:
    sys.exit(f"put-cost: {failures[0]}")
print(f"{kind} {(server_cpu_seconds() - before) * 1000 / count:.3f}")
