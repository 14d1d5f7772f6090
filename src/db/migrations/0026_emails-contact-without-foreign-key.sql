-- An email keeps no foreign key to its contact: its check locked the contact's row for every email
-- a campaign batch inserted (a WAL record and a dirtied page of `contacts` per recipient, so a
-- campaign rewrote the table's pages). A contact's delete leaves its emails without a contact itself
-- (contacts/deleted.ts), as the key's SET NULL did. docs/decisions.md § Growth.
ALTER TABLE "emails" DROP CONSTRAINT "emails_contact_id_contacts_id_fk";
