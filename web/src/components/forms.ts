import { notifications } from '@mantine/notifications';
import { errorSuggestion, type FieldError, fieldErrors, isApiError, SESSION_ENDED } from '../api.ts';

type FormLike = { setFieldError: (path: string, error: string) => void; getValues: () => object };

/** Field errors listed in a notification: the first few, then how many more. */
const LISTED = 3;

/**
 * Shows an API error where it belongs: each `errors[]` entry on the form field it names (the first
 * path segment: `data.plan` lands on a `data` field if the form has no `data.plan`), the rest as a
 * notification under the error's message (`emails.1: Invalid email address`), with the API's
 * suggestion if it made one, and the page's `note` (what to do about it from here).
 */
export function showApiError(err: unknown, form?: FormLike, note?: string): void {
  // The "log in again" dialog (SessionExpired.tsx) has said it already.
  if (isApiError(err) && err.code === SESSION_ENDED) return;
  const message = err instanceof Error ? err.message : 'Something went wrong';
  const suggestion = errorSuggestion(err);
  let unplaced: FieldError[] = fieldErrors(err);
  if (form && unplaced.length > 0) {
    const values = form.getValues() as Record<string, unknown>;
    unplaced = unplaced.filter((e) => {
      const field = e.field in values ? e.field : e.field.split('.')[0];
      if (field in values) form.setFieldError(field, e.message);
      return !(field in values);
    });
    if (unplaced.length === 0 && !suggestion && !note) return;
  }
  // The simple `{ error: "from is required" }` body is its own message, and a message often
  // quotes its first field error ("The workflow cannot be enabled: <it>"): not listed again.
  const listed = unplaced.filter((e) => !message.includes(e.message));
  const lines = listed.slice(0, LISTED).map((e) => `${e.field}: ${e.message}`);
  if (listed.length > LISTED) lines.push(`and ${listed.length - LISTED} more`);
  if (suggestion) lines.push(suggestion);
  if (note) lines.push(note);
  notifications.show({ color: 'red', title: message, message: lines.join('\n') || ' ', autoClose: 8000, styles: { description: { whiteSpace: 'pre-line' } } });
}

export function notifySuccess(message: string): void {
  notifications.show({ color: 'green', message, autoClose: 3000 });
}
