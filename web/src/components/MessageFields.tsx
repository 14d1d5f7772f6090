import { Button, Grid, Group, Input, Select, TextInput, Textarea } from '@mantine/core';
import { Suspense, lazy, useRef, useState } from 'react';
import type { UseFormReturnType } from '@mantine/form';
import { EMAIL_TYPES, type EmailType } from '../types.ts';
import { useServerConfig } from '../hooks.ts';
import { ImageLibrary } from './ImageLibrary.tsx';

const CodeEditor = lazy(() => import('./CodeEditor.tsx'));
const BODY_LABEL = 'Body (HTML with Liquid)';
const BODY_HELP = 'Variables: {{firstName}}, {{plan ?? "free"}}, {{unsubscribeUrl}}';

export type MessageValues = {
  name: string;
  subject: string;
  from: string;
  fromName: string;
  replyTo: string;
  type: EmailType;
  body: string;
};

/** The content fields templates and campaigns share. */
export function MessageFields<T extends MessageValues>({ form }: { form: UseFormReturnType<T> }) {
  const [imagesOpen, setImagesOpen] = useState(false);
  const sandbox = useServerConfig().data?.sandboxDomain;
  const insertAtCursor = useRef<((text: string) => void) | null>(null);
  // At the editor's cursor; at the end while the editor is still loading.
  const insert = (tag: string) =>
    insertAtCursor.current ? insertAtCursor.current(tag) : form.setValues({ body: `${form.getValues().body}${tag}` } as Partial<T>);
  return (
    <>
      <TextInput label="Name" description="Only you see this" required {...form.getInputProps('name')} />
      <TextInput label="Subject" required {...form.getInputProps('subject')} />
      <Grid>
        <Grid.Col span={{ base: 12, sm: 6 }}>
          <TextInput
            label="From address"
            placeholder={sandbox ? `hello@${sandbox}` : 'hello@mail.example.com'}
            description={sandbox ? `Mail is captured: any address @${sandbox} sends without a verified domain` : undefined}
            required
            {...form.getInputProps('from')}
          />
        </Grid.Col>
        <Grid.Col span={{ base: 12, sm: 6 }}>
          <TextInput label="From name" placeholder="Acme" {...form.getInputProps('fromName')} />
        </Grid.Col>
        <Grid.Col span={{ base: 12, sm: 6 }}>
          <TextInput label="Reply-to" {...form.getInputProps('replyTo')} />
        </Grid.Col>
        <Grid.Col span={{ base: 12, sm: 6 }}>
          <Select label="Type" allowDeselect={false} data={EMAIL_TYPES} {...form.getInputProps('type')} />
        </Grid.Col>
      </Grid>
      <Suspense
        fallback={
          <Textarea
            label={BODY_LABEL}
            description={BODY_HELP}
            required
            autosize
            minRows={12}
            styles={{ input: { fontFamily: 'ui-monospace, SFMono-Regular, Menlo, monospace', fontSize: 13 } }}
            {...form.getInputProps('body')}
          />
        }
      >
        <Input.Wrapper label={BODY_LABEL} description={BODY_HELP} required error={form.errors.body} labelElement="div">
          <CodeEditor
            label={BODY_LABEL}
            value={form.values.body}
            invalid={Boolean(form.errors.body)}
            onChange={(v) => form.setValues({ body: v } as Partial<T>)}
            insertRef={insertAtCursor}
          />
        </Input.Wrapper>
      </Suspense>
      <Group justify="flex-end" mt={-8}>
        <Button variant="default" size="xs" onClick={() => setImagesOpen(true)}>
          Images…
        </Button>
      </Group>
      <ImageLibrary opened={imagesOpen} onClose={() => setImagesOpen(false)} onInsert={insert} />
    </>
  );
}

/** Empty optional fields are sent as null (the API clears them). */
export function messagePayload(v: MessageValues) {
  return {
    name: v.name,
    subject: v.subject,
    from: v.from,
    fromName: v.fromName || null,
    replyTo: v.replyTo || null,
    type: v.type,
    body: v.body,
  };
}
