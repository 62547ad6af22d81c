// The request-info port against the cases of Kubernetes' own requestinfo_test.go (1.20), and the
// mapping of request info to kiteline's roles (src/proxy/authorize.ts).
import t from 'tap';
import { BadRequestError } from '../../src/errors.js';
import { proxyAccess } from '../../src/proxy/authorize.js';
import { parseProxyUrl } from '../../src/proxy/proxy-url.js';
import { parseRequestInfo } from '../../src/proxy/request-info.js';

function info(method: string, url: string) {
  const mark = url.indexOf('?');
  return parseRequestInfo(method, mark < 0 ? url : url.slice(0, mark), mark < 0 ? '' : url.slice(mark + 1));
}

t.test('TestGetAPIRequestInfo: success cases', async (t) => {
  // method, url, verb, apiPrefix, group, version, namespace, resource, subresource, name, parts
  const cases: Array<[string, string, string, string, string, string, string, string, string, string, string[]]> = [
    ['GET', '/api/v1/namespaces', 'list', 'api', '', 'v1', '', 'namespaces', '', '', ['namespaces']],
    [
      'GET',
      '/api/v1/namespaces/other',
      'get',
      'api',
      '',
      'v1',
      'other',
      'namespaces',
      '',
      'other',
      ['namespaces', 'other'],
    ],
    ['GET', '/api/v1/namespaces/other/pods', 'list', 'api', '', 'v1', 'other', 'pods', '', '', ['pods']],
    ['GET', '/api/v1/namespaces/other/pods/foo', 'get', 'api', '', 'v1', 'other', 'pods', '', 'foo', ['pods', 'foo']],
    ['HEAD', '/api/v1/namespaces/other/pods/foo', 'get', 'api', '', 'v1', 'other', 'pods', '', 'foo', ['pods', 'foo']],
    ['GET', '/api/v1/pods', 'list', 'api', '', 'v1', '', 'pods', '', '', ['pods']],
    ['HEAD', '/api/v1/pods', 'list', 'api', '', 'v1', '', 'pods', '', '', ['pods']],
    [
      'GET',
      '/api/v1/proxy/namespaces/other/pods/foo',
      'proxy',
      'api',
      '',
      'v1',
      'other',
      'pods',
      '',
      'foo',
      ['pods', 'foo'],
    ],
    [
      'GET',
      '/api/v1/proxy/namespaces/other/pods/foo/subpath/not/a/subresource',
      'proxy',
      'api',
      '',
      'v1',
      'other',
      'pods',
      '',
      'foo',
      ['pods', 'foo', 'subpath', 'not', 'a', 'subresource'],
    ],
    ['GET', '/api/v1/watch/pods', 'watch', 'api', '', 'v1', '', 'pods', '', '', ['pods']],
    ['GET', '/api/v1/pods?watch=true', 'watch', 'api', '', 'v1', '', 'pods', '', '', ['pods']],
    ['GET', '/api/v1/pods?watch=false', 'list', 'api', '', 'v1', '', 'pods', '', '', ['pods']],
    ['GET', '/api/v1/watch/namespaces/other/pods', 'watch', 'api', '', 'v1', 'other', 'pods', '', '', ['pods']],
    ['GET', '/api/v1/namespaces/other/pods?watch=1', 'watch', 'api', '', 'v1', 'other', 'pods', '', '', ['pods']],
    ['GET', '/api/v1/namespaces/other/pods?watch=0', 'list', 'api', '', 'v1', 'other', 'pods', '', '', ['pods']],
    [
      'GET',
      '/api/v1/namespaces/other/pods/foo/status',
      'get',
      'api',
      '',
      'v1',
      'other',
      'pods',
      'status',
      'foo',
      ['pods', 'foo', 'status'],
    ],
    [
      'GET',
      '/api/v1/namespaces/other/pods/foo/proxy/subpath',
      'get',
      'api',
      '',
      'v1',
      'other',
      'pods',
      'proxy',
      'foo',
      ['pods', 'foo', 'proxy', 'subpath'],
    ],
    [
      'PUT',
      '/api/v1/namespaces/other/finalize',
      'update',
      'api',
      '',
      'v1',
      'other',
      'namespaces',
      'finalize',
      'other',
      ['namespaces', 'other', 'finalize'],
    ],
    [
      'PUT',
      '/api/v1/namespaces/other/status',
      'update',
      'api',
      '',
      'v1',
      'other',
      'namespaces',
      'status',
      'other',
      ['namespaces', 'other', 'status'],
    ],
    [
      'PATCH',
      '/api/v1/namespaces/other/pods/foo',
      'patch',
      'api',
      '',
      'v1',
      'other',
      'pods',
      '',
      'foo',
      ['pods', 'foo'],
    ],
    [
      'DELETE',
      '/api/v1/namespaces/other/pods/foo',
      'delete',
      'api',
      '',
      'v1',
      'other',
      'pods',
      '',
      'foo',
      ['pods', 'foo'],
    ],
    ['POST', '/api/v1/namespaces/other/pods', 'create', 'api', '', 'v1', 'other', 'pods', '', '', ['pods']],
    ['DELETE', '/api/v1/nodes', 'deletecollection', 'api', '', 'v1', '', 'nodes', '', '', ['nodes']],
    ['DELETE', '/api/v1/namespaces', 'deletecollection', 'api', '', 'v1', '', 'namespaces', '', '', ['namespaces']],
    ['DELETE', '/api/v1/namespaces/other/pods', 'deletecollection', 'api', '', 'v1', 'other', 'pods', '', '', ['pods']],
    [
      'DELETE',
      '/apis/extensions/v1/namespaces/other/pods',
      'deletecollection',
      'apis',
      'extensions',
      'v1',
      'other',
      'pods',
      '',
      '',
      ['pods'],
    ],
    [
      'POST',
      '/apis/extensions/v1/namespaces/other/pods',
      'create',
      'apis',
      'extensions',
      'v1',
      'other',
      'pods',
      '',
      '',
      ['pods'],
    ],
    [
      'POST',
      '/apis/extensions/v1beta3/namespaces/other/pods',
      'create',
      'apis',
      'extensions',
      'v1beta3',
      'other',
      'pods',
      '',
      '',
      ['pods'],
    ],
  ];
  for (const [
    method,
    url,
    verb,
    apiPrefix,
    apiGroup,
    apiVersion,
    namespace,
    resource,
    subresource,
    name,
    parts,
  ] of cases) {
    t.match(
      info(method, url),
      { isResourceRequest: true, verb, apiPrefix, apiGroup, apiVersion, namespace, resource, subresource, name, parts },
      `${method} ${url}`,
    );
  }
});

t.test('TestGetAPIRequestInfo: error cases and TestGetNonAPIRequestInfo', async (t) => {
  for (const url of [
    '/',
    '/api/version/',
    '/apis/group/version/',
    '/badprefix/version/resource',
    '/apis/version/resource',
  ]) {
    t.equal(info('GET', url).isResourceRequest, false, url);
  }
  const cases: Array<[string, boolean]> = [
    ['/api/version/resource', true],
    ['/apis/group/version/resource/name/subresource', true],
    ['/api/version/resource/name/subresource', true],
    ['/apis/batch/v1/job', true],
    ['/apis/batch/v1/job/foo', true],
    ['/apis/batch/v1/job/foo/scale', true],
    ['/not-api/version/resource', false],
    ['/apis/extensions/v1beta1', false],
    ['/apis/extensions/v1beta1/', false],
    ['/api/version', false],
    ['/api', false],
    ['/', false],
    ['', false],
  ];
  for (const [url, expected] of cases) t.equal(info('GET', url).isResourceRequest, expected, url || '(empty)');
  t.match(
    info('GET', '/version'),
    { isResourceRequest: false, verb: 'get', path: '/version' },
    'a non-resource verb is the lower-case method',
  );
});

t.test('TestFieldSelectorParsing', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['/apis/group/version/resource', '', 'list'],
    ['/apis/group/version/resource?fieldSelector=metadata.name=name1', 'name1', 'list'],
    ['/apis/group/version/resource?watch=true&fieldSelector=metadata.name=name1', 'name1', 'watch'],
    ['/apis/group/version/resource?fieldSelector=foo=bar', '', 'list'],
    ['/apis/group/version/resource?fieldSelector=metadata.name=name1,foo', '', 'list'],
    ['/apis/group/version/resource?fieldSelector=metadata.name=name1,foo&watch=true', '', 'watch'],
    ['/apis/group/version/resource?fieldSelector=metadata.name=name1,foo&watch=false', '', 'list'],
  ];
  for (const [url, name, verb] of cases) t.match(info('GET', url), { name, verb }, url);
  t.match(info('GET', '/api/v1/pods?watch=yes'), { verb: 'watch' }, 'any value but 0 and false is a watch');
  t.match(info('GET', '/api/v1/pods?watch=FALSE'), { verb: 'list' });
  t.match(
    info('GET', '/api/v1/pods?fieldSelector=metadata.name%3Da&limit=x'),
    { name: '', verb: 'list' },
    'options that fail to decode give no name',
  );
  t.match(info('GET', '/api/v1/pods?fieldSelector=metadata.name!%3Da'), { name: '' }, 'a != term names nothing');
});

t.test('request info to kiteline access', async (t) => {
  const access = (method: string, url: string) => proxyAccess(info(method, url));
  t.same(access('GET', '/api/v1/namespaces/shop/pods/web/log'), {
    verb: 'get',
    resource: 'pods/log',
    namespace: 'shop',
    name: 'web',
  });
  t.same(access('POST', '/api/v1/namespaces/shop/pods/web/exec'), {
    verb: 'create',
    resource: 'pods/exec',
    namespace: 'shop',
    name: 'web',
  });
  t.match(
    access('GET', '/api/v1/namespaces/shop/pods/web/exec'),
    { verb: 'create', resource: 'pods/exec' },
    'a WebSocket exec (GET) needs create too',
  );
  t.match(access('GET', '/api/v1/namespaces/shop/pods/web/portforward'), {
    verb: 'create',
    resource: 'pods/portforward',
  });
  t.match(
    access('GET', '/api/v1/proxy/namespaces/shop/services/web'),
    { verb: 'create', resource: 'services/proxy' },
    'the old /proxy/ paths are the proxy subresource',
  );
  t.match(access('PUT', '/apis/apps/v1/namespaces/shop/deployments/web/scale'), {
    verb: 'update',
    resource: 'deployments/scale',
  });
  t.match(
    access('DELETE', '/api/v1/namespaces/shop/pods'),
    { verb: 'delete', resource: 'pods', name: undefined },
    'deletecollection needs delete',
  );
  t.match(access('GET', '/apis/example.com/v1/namespaces/shop/widgets/w/status'), {
    resource: 'widgets.example.com/status',
  });
  t.match(access('GET', '/api/v1/pods'), { verb: 'list', namespace: undefined }, 'all namespaces');
  t.match(
    access('DELETE', '/api/v1/namespaces/shop'),
    { verb: 'delete', resource: 'namespaces', namespace: undefined, name: 'shop' },
    'a Namespace object is cluster-scoped',
  );
  t.throws(
    () => access('OPTIONS', '/api/v1/namespaces/shop/pods'),
    { status: 405 } as unknown as Error,
    'a method with no verb',
  );
});

t.test('proxy URLs', async (t) => {
  t.same(parseProxyUrl('/k8s/clusters/prod/api/v1/pods?watch=1'), {
    cluster: 'prod',
    path: '/api/v1/pods',
    rawPath: '/api/v1/pods',
    query: 'watch=1',
  });
  t.same(parseProxyUrl('/k8s/clusters/a%20b/version'), {
    cluster: 'a b',
    path: '/version',
    rawPath: '/version',
    query: '',
  });
  for (const bad of [
    '/k8s/clusters/x/api/v1/namespaces/a/../b',
    '/k8s/clusters/x/api//v1',
    '/k8s/clusters/x/api/v1/namespaces/a%2Fb/pods',
    '/k8s/clusters/x/api/%ZZ',
    '/k8s/clusters//api',
    '/k8s/clusters/x/api/v1/%00',
  ]) {
    t.throws(() => parseProxyUrl(bad), BadRequestError, bad);
  }
});
