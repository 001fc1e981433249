import { ServerConnection } from '@jupyterlab/services';

import { APIError, JobsClient } from '../handler';

/** The URL without the cache-busting timestamp ServerConnection appends to GETs. */
function urlOf(request: Request): string {
  return decodeURIComponent(request.url.replace(/[?&]\d{10,}$/, ''));
}

function clientAnswering(status: number, body: unknown) {
  const requests: Request[] = [];
  const settings = ServerConnection.makeSettings({
    baseUrl: 'http://lab.test/base/',
    fetch: async (request: RequestInfo) => {
      requests.push(request as Request);
      return new Response(JSON.stringify(body), {
        status,
        headers: { 'Content-Type': 'application/json' }
      });
    }
  });
  return { client: new JobsClient(settings), requests };
}

describe('JobsClient', () => {
  it('asks the API under the server base URL with the query it needs', async () => {
    const { client, requests } = clientAnswering(200, {
      records: [],
      since: 5,
      next: 5,
      status: 'running'
    });
    await client.metrics('0a1b2c3d', 5);
    await client.log('0a1b2c3d', -65536, 'console', 1000);
    await client.listJobs({ status: ['running', 'queued'], limit: 10 });
    await client.stop('0a1b2c3d');
    expect(
      requests.map(request => `${request.method} ${urlOf(request)}`)
    ).toEqual([
      'GET http://lab.test/base/nbtoolkit/api/jobs/0a1b2c3d/metrics?since=5',
      'GET http://lab.test/base/nbtoolkit/api/jobs/0a1b2c3d/log?offset=-65536&limit=1000&view=console',
      'GET http://lab.test/base/nbtoolkit/api/jobs?status=running,queued&limit=10',
      'POST http://lab.test/base/nbtoolkit/api/jobs/0a1b2c3d/stop'
    ]);
  });

  it('asks for a job with its last ETag and keeps the job the server says did not change (304)', async () => {
    const requests: Request[] = [];
    const answers = [
      new Response(JSON.stringify({ id: '0a1b2c3d', step: 5 }), {
        status: 200,
        headers: { ETag: '"v1"' }
      }),
      new Response(null, { status: 304, headers: { ETag: '"v1"' } })
    ];
    const settings = ServerConnection.makeSettings({
      baseUrl: 'http://lab.test/base/',
      fetch: async (request: RequestInfo) => {
        requests.push(request as Request);
        return answers.shift()!;
      }
    });
    const client = new JobsClient(settings);
    const first = await client.getJob('0a1b2c3d');
    const second = await client.getJob('0a1b2c3d');
    expect(second).toBe(first);
    expect(requests.map(r => r.headers.get('If-None-Match'))).toEqual([
      null,
      '"v1"'
    ]);
  });

  it('asks for a downsampled first read with points', async () => {
    const { client, requests } = clientAnswering(200, {
      records: [],
      since: 0,
      next: 0,
      status: 'running'
    });
    await client.metrics('0a1b2c3d', 0, 500);
    expect(urlOf(requests[0])).toBe(
      'http://lab.test/base/nbtoolkit/api/jobs/0a1b2c3d/metrics?since=0&points=500'
    );
  });

  it('never puts a raw id into the path', async () => {
    const { client, requests } = clientAnswering(400, {
      message: 'not a job id'
    });
    await expect(client.getJob('../../etc')).rejects.toBeInstanceOf(APIError);
    expect(requests[0].url.replace(/[?&]\d{10,}$/, '')).toBe(
      'http://lab.test/base/nbtoolkit/api/jobs/..%2F..%2Fetc'
    );
  });

  it("rejects with the server's sentence", async () => {
    const { client } = clientAnswering(404, {
      message: "no job '0badc0de'; `nbtoolkit jobs` lists them"
    });
    const error = await client.getJob('0badc0de').catch(e => e);
    expect(error).toBeInstanceOf(APIError);
    expect(error.status).toBe(404);
    expect(error.message).toBe(
      "the job API answered 404: no job '0badc0de'; `nbtoolkit jobs` lists them"
    );
  });
});
