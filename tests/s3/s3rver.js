#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// s3rver (the S3-protocol server the tests and benchmarks run on loopback) with the write
// semantics S3 guarantees: a PUT replaces an object atomically, once its whole body is stored.
// s3rver 3.7 writes an object in place and answers before its file stream has flushed, so a
// reader right after a PUT can get a short body, and a PUT cut off mid-body (a writer killed)
// leaves a torn object behind; S3 never shows either. Here the body goes to a temporary file
// that is renamed over the object only when the request's body arrived whole. Same arguments
// as s3rver.
'use strict';

const crypto = require('crypto');
const fs = require('fs-extra');
const http = require('http');
const path = require('path');
const { pipeline, Transform } = require('stream');
const FilesystemStore = require('s3rver/lib/stores/filesystem');

FilesystemStore.prototype.putObject = async function putObject(object) {
  const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
  // Not a stored object to listings: they take only names ending in the object suffix.
  const tmp = `${objectPath}.${process.pid}-${crypto.randomBytes(6).toString('hex')}.tmp`;
  const md5 = crypto.createHash('md5');
  let size = 0;

  await fs.mkdirp(path.dirname(objectPath));
  try {
    if (Buffer.isBuffer(object.content)) {
      await fs.writeFile(tmp, object.content);
      md5.update(object.content);
      size = object.content.length;
    } else {
      const count = new Transform({
        transform(chunk, encoding, callback) {
          md5.update(chunk, encoding);
          size += chunk.length;
          callback(null, chunk);
        },
      });
      // pipeline() fails when the request is aborted, and resolves only once the file stream
      // has written everything.
      await new Promise((resolve, reject) =>
        pipeline(object.content, count, fs.createWriteStream(tmp), err =>
          err ? reject(err) : resolve(),
        ),
      );
      // A request body (not the parts of a multipart upload) must have arrived whole.
      if (object.content instanceof http.IncomingMessage) {
        const want = Number(object.content.headers['content-length']);
        if (!object.content.complete || (Number.isFinite(want) && size !== want)) {
          throw new Error(`body cut off at ${size} bytes of ${want}`);
        }
      }
    }
    const digest = md5.digest('hex');
    await this.putMetadata(object.bucket, object.key, object.metadata, digest);
    await fs.rename(tmp, objectPath);
    return { size, md5: digest };
  } catch (err) {
    await fs.remove(tmp).catch(() => {});
    throw err;
  }
};

require('s3rver/bin/s3rver.js');
