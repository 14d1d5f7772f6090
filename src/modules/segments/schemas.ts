import { z } from 'zod';
import type { SegmentType } from '../../db/schema/segments.ts';
import { lengthFirst } from '../../http/bounded-array.ts';
import { SimpleError } from '../../http/errors.ts';
import { component } from '../../http/openapi.ts';
import { pageParams } from '../../http/pagination.ts';
import { parse } from '../../http/validate.ts';
import { isStorableText } from '../../db/storable-text.ts';
import { contactSchema } from '../contacts/schemas.ts';

export type SegmentRecord = {
  id: string;
  name: string;
  description: string | null;
  type: SegmentType;
  /** The condition tree (DYNAMIC), null for STATIC. */
  condition: unknown;
  trackMembership: boolean;
  memberCount: number;
  projectId: string;
  createdAt: string;
  updatedAt: string;
};

const name = z
  .string()
  .trim()
  .min(1, 'name must not be empty')
  .max(100, 'name must be at most 100 characters')
  .refine(isStorableText, 'name must not contain NUL characters');
const description = z.string().max(500, 'description must be at most 500 characters').refine(isStorableText, 'description must not contain NUL characters');

/** The tree itself is checked by the condition engine (400 BAD_REQUEST with its place), not by zod. */
const condition = z.record(z.string(), z.unknown());

export const createSegmentBody = z
  .object({
    name,
    description: description.nullable().optional(),
    type: z.enum(['DYNAMIC', 'STATIC']).default('DYNAMIC'),
    condition: z.unknown().optional(),
    trackMembership: z.boolean().default(false),
  })
  .strict();

export type CreateSegmentInput = z.output<typeof createSegmentBody>;

const isPlainObject = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * POST /segments: a missing name, or a missing or non-object condition for a DYNAMIC segment, is
 * the spec's simple 400 body; anything else invalid is a 422. A STATIC segment's condition is ignored.
 */
export function parseCreateSegment(body: unknown): CreateSegmentInput {
  if (!isPlainObject(body)) throw new SimpleError('name is required');
  const b = body as Record<string, unknown>;
  if (b.name === undefined || b.name === null) throw new SimpleError('name is required');
  const input = parse(createSegmentBody, body);
  if (input.type === 'DYNAMIC' && !isPlainObject(input.condition)) {
    throw new SimpleError('condition is required for a DYNAMIC segment and must be an object');
  }
  return input.type === 'STATIC' ? { ...input, condition: undefined } : input;
}

export const updateSegmentBody = z
  .object({
    name,
    description: description.nullable(),
    condition,
    trackMembership: z.boolean(),
  })
  .partial()
  .strict();

export type UpdateSegmentInput = z.output<typeof updateSegmentBody>;

export const segmentIdParams = z.object({ id: z.string() });

export const segmentContactsQuery = pageParams(100);

const email = z.string().trim().max(254, 'Email must be at most 254 characters').email('Invalid email address');
const emailList = () => lengthFirst(z.array(email).min(1, 'At least one email is required').max(1000, 'At most 1000 emails per call'));

export const addMembersBody = z
  .object({
    emails: emailList(),
    createMissing: z.boolean().default(false),
    subscribed: z.boolean().optional(),
  })
  .strict();

export type AddMembersInput = z.output<typeof addMembersBody>;

export const removeMembersBody = z.object({ emails: emailList() }).strict();

// Responses (the document and the strict response check: src/http/openapi.ts)

export const segmentSchema = component(
  'Segment',
  z.object({
    id: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    type: z.enum(['DYNAMIC', 'STATIC']),
    condition: z.unknown().describe('The condition tree (DYNAMIC); null for STATIC'),
    trackMembership: z.boolean(),
    memberCount: z.number().int(),
    projectId: z.string(),
    createdAt: z.string(),
    updatedAt: z.string(),
  }),
);

export const segmentContactsSchema = z.object({
  data: z.array(contactSchema),
  total: z.number().int(),
  page: z.number().int(),
  pageSize: z.number().int(),
});

export const membersAddedSchema = z.object({ added: z.number().int(), created: z.number().int(), notFound: z.array(z.string()) });
export const membersRemovedSchema = z.object({ removed: z.number().int() });
export const computedSchema = z.object({ added: z.number().int(), removed: z.number().int(), total: z.number().int() });
export const refreshedSchema = z.object({ memberCount: z.number().int() });
