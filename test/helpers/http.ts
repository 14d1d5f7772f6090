/** A tiny HTTP client for tests: JSON in, parsed JSON (or text) out, headers and status kept. */

export type Res<T = any> = { status: number; headers: Headers; body: T; text: string };

export type RequestOptions = {
  body?: unknown;
  /** Raw body sent as is (no JSON encoding). */
  raw?: string | Buffer | FormData;
  headers?: Record<string, string>;
  key?: string;
  cookie?: string;
};

export type Api = {
  request: <T = any>(method: string, path: string, opts?: RequestOptions) => Promise<Res<T>>;
  get: <T = any>(path: string, opts?: RequestOptions) => Promise<Res<T>>;
  post: <T = any>(path: string, body?: unknown, opts?: RequestOptions) => Promise<Res<T>>;
  patch: <T = any>(path: string, body?: unknown, opts?: RequestOptions) => Promise<Res<T>>;
  put: <T = any>(path: string, body?: unknown, opts?: RequestOptions) => Promise<Res<T>>;
  delete: <T = any>(path: string, opts?: RequestOptions) => Promise<Res<T>>;
  /** The same client with a default API key (or session cookie) on every request. */
  as: (auth: { key?: string; cookie?: string; headers?: Record<string, string> }) => Api;
};

export function createApi(base: string, defaults: { key?: string; cookie?: string; headers?: Record<string, string> } = {}): Api {
  const request = async <T>(method: string, path: string, opts: RequestOptions = {}): Promise<Res<T>> => {
    const headers: Record<string, string> = { ...defaults.headers, ...opts.headers };
    const key = opts.key ?? defaults.key;
    const cookie = opts.cookie ?? defaults.cookie;
    if (key) headers.authorization = `Bearer ${key}`;
    if (cookie) headers.cookie = cookie;
    let body: RequestInit['body'];
    if (opts.raw !== undefined) body = opts.raw as RequestInit['body'];
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(base + path, { method, headers, body, redirect: 'manual' });
    const text = await res.text();
    let parsed: unknown = text;
    if ((res.headers.get('content-type') ?? '').includes('json') && text) parsed = JSON.parse(text);
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  };
  const api: Api = {
    request,
    get: (p, o) => request('GET', p, o),
    post: (p, b, o) => request('POST', p, { ...o, body: b }),
    patch: (p, b, o) => request('PATCH', p, { ...o, body: b }),
    put: (p, b, o) => request('PUT', p, { ...o, body: b }),
    delete: (p, o) => request('DELETE', p, o),
    as: (auth) => createApi(base, { ...defaults, ...auth }),
  };
  return api;
}
