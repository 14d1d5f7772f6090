import { notifications } from '@mantine/notifications';
import { fieldErrors } from '../api.ts';

type FormLike = { setFieldError: (path: string, error: string) => void; getValues: () => object };

/**
 * Shows an API error where it belongs: each `errors[]` entry on the form field it names (the first
 * path segment: `data.plan` lands on a `data` field if the form has no `data.plan`), the rest as a
 * notification.
 */
export function showApiError(err: unknown, form?: FormLike): void {
  const unplaced: string[] = [];
  const errors = fieldErrors(err);
  if (form && errors.length > 0) {
    const values = form.getValues() as Record<string, unknown>;
    for (const e of errors) {
      const field = e.field in values ? e.field : e.field.split('.')[0];
      if (field in values) form.setFieldError(field, e.message);
      else unplaced.push(`${e.field}: ${e.message}`);
    }
    if (unplaced.length === 0) return;
  }
  const message = err instanceof Error ? err.message : 'Something went wrong';
  notifications.show({ color: 'red', title: message, message: unplaced.join('\n') || ' ', autoClose: 8000 });
}

export function notifySuccess(message: string): void {
  notifications.show({ color: 'green', message, autoClose: 3000 });
}
