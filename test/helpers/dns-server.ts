import type { Socket as UdpSocket } from 'node:dgram';
import type { Server as TcpServer, Socket } from 'node:net';
import dns2 from 'dns2';

/**
 * A real authoritative DNS server on loopback (UDP and TCP on the same port), so code under test
 * resolves through node's resolver exactly as in production (`DNS_SERVERS=<address>`).
 */

export type RecordType = 'TXT' | 'CNAME' | 'MX' | 'A' | 'AAAA' | 'NS';
export type RecordValue = string | { exchange: string; priority: number };

export type TestDns = {
  /** "127.0.0.1:<port>", for DNS_SERVERS. */
  address: string;
  /** Replaces the records of `type` at `name` (each TXT value is one record, split into 255-byte strings). */
  set(name: string, type: RecordType, values: RecordValue[]): void;
  /** Removes the records of `type` at `name`, or every record at `name`. */
  remove(name: string, type?: string): void;
  stop(): Promise<void>;
};

const { Packet } = dns2;
const TTL = 1;
// RFC 1035 § 4.1.1 response codes (not in dns2's typings).
const RCODE = { FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3 } as const;

const normalise = (name: string) => name.trim().toLowerCase().replace(/\.$/, '');

const typeName = (code: number): string | undefined => Object.entries(Packet.TYPE).find(([, v]) => v === code)?.[0];

/** A TXT value as real DNS carries it: character-strings of at most 255 bytes. */
export function splitTxt(value: string): Buffer[] {
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length === 0) return [Buffer.alloc(0)];
  const parts: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += 255) parts.push(bytes.subarray(i, i + 255));
  return parts;
}

export async function startTestDns(): Promise<TestDns> {
  const zone = new Map<string, Map<RecordType, RecordValue[]>>();

  const rdataFor = (type: RecordType, value: RecordValue): Record<string, unknown> => {
    if (type === 'MX') {
      if (typeof value === 'string') return { exchange: value, priority: 10 };
      return { exchange: value.exchange, priority: value.priority };
    }
    const s = typeof value === 'string' ? value : value.exchange;
    switch (type) {
      case 'TXT':
        return { data: splitTxt(s) };
      case 'CNAME':
        return { domain: s };
      case 'NS':
        return { ns: s };
      default:
        return { address: s };
    }
  };

  const nameExists = (name: string) => {
    if (zone.has(name)) return true;
    for (const n of zone.keys()) if (n.endsWith(`.${name}`)) return true; // empty non-terminal
    return false;
  };

  const answer = (request: dns2.Packet): dns2.Packet => {
    const response = Packet.createResponseFromRequest(request);
    response.header.aa = 1;
    response.header.ra = 1;
    const [question] = request.questions;
    if (!question) {
      response.header.rcode = RCODE.FORMERR;
      return response;
    }
    let name = normalise(question.name);
    const qtype = typeName(question.type) as RecordType | undefined;
    // Follow CNAME chains within the zone, as a recursive resolver would.
    for (let hops = 0; hops < 8; hops++) {
      const records = zone.get(name);
      const cname = records?.get('CNAME');
      if (qtype && qtype !== 'CNAME' && cname && cname.length > 0 && !records?.has(qtype)) {
        const target = typeof cname[0] === 'string' ? cname[0] : cname[0].exchange;
        response.answers.push(Packet.createResourceFromQuestion(question, { name, type: Packet.TYPE.CNAME, class: Packet.CLASS.IN, ttl: TTL, domain: target }));
        name = normalise(target);
        continue;
      }
      for (const value of (qtype && records?.get(qtype)) || []) {
        response.answers.push(
          Packet.createResourceFromQuestion(question, {
            name,
            type: question.type,
            class: Packet.CLASS.IN,
            ttl: TTL,
            ...rdataFor(qtype!, value),
          } as never),
        );
      }
      if (response.answers.length === 0 && !nameExists(name)) response.header.rcode = RCODE.NXDOMAIN;
      return response;
    }
    response.header.rcode = RCODE.SERVFAIL;
    return response;
  };

  const handle: dns2.DnsHandler = (request, send) => {
    let response: dns2.Packet;
    try {
      response = answer(request);
    } catch {
      response = Packet.createResponseFromRequest(request);
      response.header.rcode = RCODE.SERVFAIL;
    }
    send(response).catch(() => {});
  };

  // UDP and TCP must share the port (resolvers retry truncated answers over TCP): take a free TCP
  // port, then bind UDP to it, retrying if that UDP port happens to be taken.
  let udp: UdpSocket | null = null;
  let tcp: TcpServer | null = null;
  let port = 0;
  const connections = new Set<Socket>();
  for (let attempt = 0; attempt < 20 && !udp; attempt++) {
    const t = dns2.createTCPServer(handle);
    t.on('requestError', () => {});
    t.on('connection', (socket) => {
      connections.add(socket);
      socket.on('close', () => connections.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      t.once('error', reject);
      t.listen(0, '127.0.0.1', () => resolve());
    });
    const p = (t.address() as { port: number }).port;
    const u = dns2.createUDPServer({ type: 'udp4' });
    u.on('request', handle);
    u.on('requestError', () => {});
    const ok = await new Promise<boolean>((resolve) => {
      u.once('error', () => resolve(false));
      u.bind(p, '127.0.0.1', () => resolve(true));
    });
    if (ok) {
      udp = u;
      tcp = t;
      port = p;
    } else {
      u.close();
      await new Promise<void>((resolve) => t.close(() => resolve()));
    }
  }
  if (!udp || !tcp) throw new Error('could not bind a test DNS server');
  const udpSocket = udp;
  const tcpServer = tcp;
  udpSocket.on('error', () => {});

  return {
    address: `127.0.0.1:${port}`,
    set(name, type, values) {
      const n = normalise(name);
      const records = zone.get(n) ?? new Map<RecordType, RecordValue[]>();
      records.set(type, [...values]);
      zone.set(n, records);
    },
    remove(name, type) {
      const n = normalise(name);
      if (!type) {
        zone.delete(n);
        return;
      }
      const records = zone.get(n);
      records?.delete(type.toUpperCase() as RecordType);
      if (records && records.size === 0) zone.delete(n);
    },
    async stop() {
      await new Promise<void>((resolve) => udpSocket.close(() => resolve()));
      for (const socket of connections) socket.destroy();
      await new Promise<void>((resolve) => tcpServer.close(() => resolve()));
    },
  };
}
