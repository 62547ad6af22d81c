// Request body parsers of the resource routes (registered inside their encapsulated plugin only):
// plain JSON, the three JSON patch media types, and YAML (server-side apply's media type, and
// application/yaml for creates and replaces). Bodies are parsed here so that malformed ones get a
// clear 400 and never reach a cluster; an empty body parses to undefined (DELETE may carry a
// content type without a body).
import type { FastifyInstance } from 'fastify';
import { parse as parseYaml } from 'yaml';
import { BadRequestError } from '../errors.js';

export const JSON_MEDIA_TYPES = [
  'application/json',
  'application/merge-patch+json',
  'application/json-patch+json',
  'application/strategic-merge-patch+json',
];
export const YAML_MEDIA_TYPES = ['application/apply-patch+yaml', 'application/yaml', 'application/x-yaml'];

export function parseJsonBody(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new BadRequestError(`request body is not valid JSON: ${(err as Error).message}`);
  }
}

export function parseYamlBody(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return parseYaml(text, { maxAliasCount: 50, prettyErrors: false });
  } catch (err) {
    throw new BadRequestError(
      `request body is not valid YAML (one document expected): ${(err as Error).message.split('\n')[0]}`,
    );
  }
}

export function registerBodyParsers(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser(JSON_MEDIA_TYPES, { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  app.addContentTypeParser(YAML_MEDIA_TYPES, { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, parseYamlBody(body as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}
