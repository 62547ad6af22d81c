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
import { NAME_PATTERN } from '../../cluster-access/segments.js';
import { clusterCookie, clusterHeader, objectOf, replies, streamed, type App } from '../schemas.js';
import { toolRequest, withClientSignal, type ToolRequest } from '../tool-request.js';

const PodParams = Type.Object({
  namespace: Type.String({ maxLength: 63, pattern: '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$' }),
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

export default async function podFileRoutes(app: App) {
  const { services } = app;
  // Encapsulated: only these routes take multipart bodies, one file of at most MAX_UPLOAD_BYTES.
  await app.register(multipart, { limits: { files: 1, fileSize: MAX_UPLOAD_BYTES, fields: 0, parts: 1 } });

  /** The cluster, the caller's exec right on the pod, and the pod and container. */
  async function podFiles(ctx: ToolRequest, p: PodParams, query: PodFileQuery): Promise<PodFileTarget> {
    await requireWorkloadAccess(services, ctx.principal, ctx.conn, {
      kind: POD_RESOURCE,
      resource: 'pods/exec',
      verb: 'create',
      namespace: p.namespace,
      name: p.pod,
    });
    return { namespace: p.namespace, pod: p.pod, container: query.container ?? '' };
  }

  const base = '/api/v1/pods/:namespace/:pod/files';
  const common = {
    tags: ['resources'],
    headers: clusterHeader,
    cookies: clusterCookie,
    params: PodParams,
    querystring: PodFileQuery,
  };

  app.get(
    base,
    {
      onRequest: app.requireUser,
      schema: {
        ...common,
        summary: 'A directory in a container: its entries, directories first',
        response: replies({ 200: Type.Array(FileInfo) }),
      },
    },
    withClientSignal(async (request, reply, signal) => {
      const { query } = request;
      const ctx = await toolRequest(app, request, reply, signal);
      const target = await podFiles(ctx, request.params, query);
      return listFiles(ctx, target, checkedPath(query.path, '/'));
    }),
  );

  app.get(
    `${base}/preview`,
    {
      onRequest: app.requireUser,
      schema: {
        ...common,
        summary: `A file shown inline (text, or a raster image), cut after ${MAX_PREVIEW_BYTES} bytes`,
        response: replies({ 200: bytes }),
      },
    },
    withClientSignal(async (request, reply, signal) => {
      const { query } = request;
      const path = checkedPath(query.path);
      const ctx = await toolRequest(app, request, reply, signal, true);
      const target = await podFiles(ctx, request.params, query);
      const { stream } = await openFileStream(ctx, target, ['cat', '--', path], MAX_PREVIEW_BYTES);
      const extension = /\.[A-Za-z0-9]+$/.exec(path)?.[0]?.toLowerCase() ?? '';
      contained(reply, IMAGE_TYPES[extension] ?? 'text/plain; charset=utf-8', disposition('inline', baseName(path)));
      return reply.send(stream);
    }),
  );

  app.get(
    `${base}/download`,
    {
      onRequest: app.requireUser,
      schema: {
        ...common,
        summary: `A file, or a directory as a tar archive (at most ${MAX_DOWNLOAD_BYTES} bytes)`,
        response: replies({ 200: bytes }),
      },
    },
    withClientSignal(async (request, reply, signal) => {
      const { query } = request;
      const path = checkedPath(query.path);
      const ctx = await toolRequest(app, request, reply, signal, true);
      const target = await podFiles(ctx, request.params, query);
      const directory = await isDirectory(ctx, target, path);
      const command = directory ? ['tar', 'cf', '-', '--', path] : ['cat', '--', path];
      const { stream } = await openFileStream(ctx, target, command, MAX_DOWNLOAD_BYTES);
      const name = baseName(path);
      contained(
        reply,
        directory ? 'application/x-tar' : 'application/octet-stream',
        disposition('attachment', directory ? `${name}.tar` : name),
      );
      return reply.send(stream);
    }),
  );

  app.put(
    `${base}/upload`,
    {
      onRequest: app.requireUser,
      schema: {
        ...common,
        summary: `Writes the multipart \`file\` (at most ${MAX_UPLOAD_BYTES} bytes) into the directory \`path\``,
        consumes: ['multipart/form-data'],
        response: replies({ 200: objectOf({ message: string, path: string }) }),
      },
    },
    withClientSignal(async (request, reply, signal) => {
      const p = request.params;
      const { query } = request;
      const directory = checkedPath(query.path);
      const ctx = await toolRequest(app, request, reply, signal, true);
      request.auditDetail = { cluster: ctx.conn.name, namespace: p.namespace, name: p.pod };
      const target = await podFiles(ctx, p, query);
      if (!request.isMultipart()) throw new BadRequestError('send the file as multipart/form-data, field `file`');
      const part = await request.file();
      if (!part || part.fieldname !== 'file')
        throw new BadRequestError('send the file as multipart/form-data, field `file`');
      const fileName = checkedFileName(part.filename);
      const data = await part.toBuffer();
      if (part.file.truncated) throw new PayloadTooLargeError(`an upload is at most ${MAX_UPLOAD_BYTES} bytes`);
      const path = await uploadFile(ctx, target, directory, fileName, data);
      request.auditDetail.subject = path;
      return { message: 'file uploaded successfully', path };
    }),
  );
}
