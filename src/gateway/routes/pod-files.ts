// Kite's pod file browser: GET /api/v1/pods/<ns>/<pod>/files?container=&path= lists a directory,
// …/files/preview shows a file inline, …/files/download sends a file (or a directory as a tar),
// PUT …/files/upload?path=<directory> writes the multipart `file` there (src/workloads/pod-files.ts:
// exec of ls, cat, tar and a fixed upload script, paths as argv words, sizes bounded). Each is an
// exec in the container, so each is authorized as one: `create` on pods/exec in the namespace
// (the built-in viewer may not), and kiteline's own namespace on the host cluster is refused.
// What a pod's file says never runs on kiteline's origin: answers carry nosniff and a sandbox
// policy, and a preview is text/plain unless it is a raster image. An upload is audited (who,
// cluster, pod, and the file's path as the record's subject).
import multipart from '@fastify/multipart';
import type { FastifyReply } from 'fastify';
import { Type, type Static } from 'typebox';
import { BadRequestError, PayloadTooLargeError } from '../../errors.js';
import { POD_RESOURCE, requireWorkloadAccess } from '../../workloads/access.js';
import {
  checkedFileName,
  checkedPath,
  isDirectory,
  listFiles,
  MAX_DOWNLOAD_BYTES,
  MAX_PREVIEW_BYTES,
  MAX_UPLOAD_BYTES,
  openFileStream,
  uploadFile,
  type PodFileTarget,
} from '../../workloads/pod-files.js';
import { DNS_LABEL_PATTERN, NAME_PATTERN } from '../../cluster-access/segments.js';
import { clusterSchema, objectOf, streamed, type App, type RequestWith } from '../schemas.js';
import { toolRequest, withClientSignal, type ToolRequest } from '../tool-request.js';

const PodParams = Type.Object({
  namespace: Type.String({ maxLength: 63, pattern: DNS_LABEL_PATTERN }),
  pod: Type.String({ maxLength: 253, pattern: NAME_PATTERN }),
});
type PodParams = Static<typeof PodParams>;
const PodFileQuery = Type.Object({
  container: Type.Optional(
    Type.String({ maxLength: 253, description: "the container; empty: the pod's only (or default) one" }),
  ),
  path: Type.Optional(Type.String({ maxLength: 4096, description: 'an absolute path in the container' })),
});
type PodFileQuery = Static<typeof PodFileQuery>;

const string = Type.String();
const FileInfo = objectOf({
  name: string,
  isDir: Type.Boolean(),
  size: string,
  modTime: string,
  mode: string,
  uid: string,
  gid: string,
});
/** Sent as a stream (reply.send), never serialized. */
const bytes = streamed({ type: 'string', description: "the file's bytes" });

/** Raster images preview as themselves; everything else (HTML and SVG included) as plain text. */
const IMAGE_TYPES: Readonly<Record<string, string>> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
};

function baseName(path: string): string {
  return path.replace(/\/+$/, '').split('/').pop() || 'root';
}

/** Content-Disposition with an ASCII fallback name and the exact name in RFC 5987 form. */
function disposition(kind: 'inline' | 'attachment', name: string): string {
  const ascii = name.replace(/[^A-Za-z0-9._-]/g, '_');
  return `${kind}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/** Headers no pod's content can escape: it never runs as kiteline's origin. */
function contained(reply: FastifyReply, type: string, contentDisposition: string): void {
  reply.headers({
    'content-type': type,
    'content-disposition': contentDisposition,
    'x-content-type-options': 'nosniff',
    'content-security-policy': 'sandbox',
    'cache-control': 'no-store',
  });
}

/** How a file is sent: the command that reads it, its size limit, its type and Content-Disposition. */
interface FileSending {
  command: string[];
  maxBytes: number;
  type: string;
  disposition: string;
}

type PodFileRequest = RequestWith<{ params: PodParams; query: PodFileQuery }>;

/** Every pod-file route names the pod (path) and the container and a path in it (query). */
const podFileParts = { params: PodParams, querystring: PodFileQuery };
const listSchema = clusterSchema('A directory in a container: its entries, directories first', {
  ...podFileParts,
  response: { 200: Type.Array(FileInfo) },
});
const previewSchema = clusterSchema(
  `A file shown inline (text, or a raster image), cut after ${MAX_PREVIEW_BYTES} bytes`,
  { ...podFileParts, response: { 200: bytes } },
);
const downloadSchema = clusterSchema(`A file, or a directory as a tar archive (at most ${MAX_DOWNLOAD_BYTES} bytes)`, {
  ...podFileParts,
  response: { 200: bytes },
});
const uploadSchema = clusterSchema(
  `Writes the multipart \`file\` (at most ${MAX_UPLOAD_BYTES} bytes) into the directory \`path\``,
  {
    ...podFileParts,
    consumes: ['multipart/form-data'],
    response: { 200: objectOf({ message: string, path: string }) },
  },
);

export default async function podFileRoutes(app: App) {
  const { services } = app;
  // Encapsulated: only these routes take multipart bodies, one file of at most MAX_UPLOAD_BYTES.
  await app.register(multipart, { limits: { files: 1, fileSize: MAX_UPLOAD_BYTES, fields: 0, parts: 1 } });

  /**
   * The cluster, the caller's exec right on the pod, and the pod and container. The pod is the
   * object of the request's audit record (uploads are audited). `longRunning`: a file transfer.
   */
  async function podFiles(
    request: PodFileRequest,
    reply: FastifyReply,
    signal: AbortSignal,
    longRunning: boolean,
  ): Promise<{ ctx: ToolRequest; target: PodFileTarget }> {
    const ctx = await toolRequest(app, request, reply, signal, longRunning);
    const { namespace, pod } = request.params;
    request.auditDetail = { cluster: ctx.conn.name, namespace, name: pod };
    await requireWorkloadAccess(services, ctx.principal, ctx.conn, {
      kind: POD_RESOURCE,
      resource: 'pods/exec',
      verb: 'create',
      namespace,
      name: pod,
    });
    return { ctx, target: { namespace, pod, container: request.query.container ?? '' } };
  }

  /** Sends the file at the query's path as `sending` says, under the headers no pod's content escapes. */
  async function sendFile(
    request: PodFileRequest,
    reply: FastifyReply,
    signal: AbortSignal,
    sending: (ctx: ToolRequest, target: PodFileTarget, path: string) => Promise<FileSending> | FileSending,
  ) {
    const path = checkedPath(request.query.path);
    const { ctx, target } = await podFiles(request, reply, signal, true);
    const { command, maxBytes, type, disposition } = await sending(ctx, target, path);
    const { stream } = await openFileStream(ctx, target, command, maxBytes);
    contained(reply, type, disposition);
    return reply.send(stream);
  }

  const base = '/api/v1/pods/:namespace/:pod/files';
  const onRequest = app.requireUser;

  app.get(
    base,
    { onRequest, schema: listSchema },
    withClientSignal(async (request, reply, signal) => {
      const { ctx, target } = await podFiles(request, reply, signal, false);
      return listFiles(ctx, target, checkedPath(request.query.path, '/'));
    }),
  );

  app.get(
    `${base}/preview`,
    { onRequest, schema: previewSchema },
    withClientSignal(async (request, reply, signal) =>
      sendFile(request, reply, signal, (_ctx, _target, path) => {
        const extension = /\.[A-Za-z0-9]+$/.exec(path)?.[0]?.toLowerCase() ?? '';
        return {
          command: ['cat', '--', path],
          maxBytes: MAX_PREVIEW_BYTES,
          type: IMAGE_TYPES[extension] ?? 'text/plain; charset=utf-8',
          disposition: disposition('inline', baseName(path)),
        };
      }),
    ),
  );

  app.get(
    `${base}/download`,
    { onRequest, schema: downloadSchema },
    withClientSignal(async (request, reply, signal) =>
      sendFile(request, reply, signal, async (ctx, target, path) => {
        const directory = await isDirectory(ctx, target, path);
        const name = baseName(path);
        return {
          command: directory ? ['tar', 'cf', '-', '--', path] : ['cat', '--', path],
          maxBytes: MAX_DOWNLOAD_BYTES,
          type: directory ? 'application/x-tar' : 'application/octet-stream',
          disposition: disposition('attachment', directory ? `${name}.tar` : name),
        };
      }),
    ),
  );

  app.put(
    `${base}/upload`,
    { onRequest, schema: uploadSchema },
    withClientSignal(async (request, reply, signal) => {
      const directory = checkedPath(request.query.path);
      const { ctx, target } = await podFiles(request, reply, signal, true);
      if (!request.isMultipart()) throw new BadRequestError('send the file as multipart/form-data, field `file`');
      const part = await request.file();
      if (!part || part.fieldname !== 'file')
        throw new BadRequestError('send the file as multipart/form-data, field `file`');
      const fileName = checkedFileName(part.filename);
      const data = await part.toBuffer();
      if (part.file.truncated) throw new PayloadTooLargeError(`an upload is at most ${MAX_UPLOAD_BYTES} bytes`);
      const path = await uploadFile(ctx, target, directory, fileName, data);
      request.auditDetail = { ...request.auditDetail, subject: path };
      return { message: 'file uploaded successfully', path };
    }),
  );
}
