import { index, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/** SNS notifications already processed, by their MessageId: a redelivered notification changes nothing. */
export const snsMessages = pgTable(
  'sns_messages',
  {
    messageId: text('message_id').primaryKey(),
    type: text('type').notNull(),
    receivedAt: timestamp('received_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [index('sns_messages_received_idx').on(t.receivedAt)],
);
