/** A self-signed certificate (ten years, RSA 2048) for `names`, and the loopback addresses, as PEM text. */
export async function selfSignedCertificate(names: string[]): Promise<{ cert: string; key: string }> {
  // Loaded with its first use: start-up stays quick.
  const { generate } = await import("selfsigned");
  const pems = await generate([{ name: "commonName", value: names[0] }], {
    keySize: 2048,
    algorithm: "sha256",
    notAfterDate: new Date(Date.now() + 10 * 365 * 86_400_000),
    extensions: [
      // Its own authority, as `openssl req -x509` makes one: a client told to trust it (Go's SSL_CERT_FILE, Bun's
      // or Node's NODE_EXTRA_CA_CERTS) takes it as a root; BoringSSL refuses a root that is no authority.
      { name: "basicConstraints", cA: true },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true, keyCertSign: true },
      {
        name: "subjectAltName",
        altNames: [
          ...names.map((value) => ({ type: 2 as const, value })),
          { type: 7 as const, ip: "127.0.0.1" },
          { type: 7 as const, ip: "::1" },
        ],
      },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}
