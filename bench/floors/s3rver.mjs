// An S3-compatible server (s3rver) for the storage benchmark, as a process of its own, with one bucket.
//   node bench/floors/s3rver.mjs <port> <directory> <bucket>
import S3rver from "s3rver";

const [port, directory, bucket] = process.argv.slice(2);
const server = new S3rver({
  port: Number(port),
  address: "127.0.0.1",
  silent: true,
  directory,
  configureBuckets: [{ name: bucket }],
});
await server.run();
console.log("listening");
process.on("SIGTERM", () => server.close().then(() => process.exit(0)));
