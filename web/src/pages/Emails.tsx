import { Stack, Text } from '@mantine/core';
import { EmailList } from '../components/EmailList.tsx';
import { PageHeader } from '../components/states.tsx';

/** Every email of the project, transactional, campaign and workflow, with its status (GET /emails). */
export function EmailsPage() {
  return (
    <Stack>
      <PageHeader title="Emails" />
      <Text c="dimmed">Every email this project sent or is sending (transactional, campaigns and workflows), newest first.</Text>
      <EmailList title="All emails" param="status" empty="Emails appear here as they are sent through the API, campaigns and workflows." />
    </Stack>
  );
}
